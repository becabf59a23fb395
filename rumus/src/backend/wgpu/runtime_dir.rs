//! A usable `XDG_RUNTIME_DIR` before the Vulkan instance is created.
//!
//! On a headless machine (no session, so no `XDG_RUNTIME_DIR`), creating the Vulkan instance
//! makes the Wayland client library, loaded by the driver's window-system support, print
//! `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` to stderr, twice, though
//! rumus uses no window. When the variable is unset, empty, not absolute or not an existing
//! directory, rumus sets it, for this process only, to a private folder
//! (`<temp dir>/rumus-runtime-<uid>`, mode 0700, created if needed) so that nothing is printed.
//! A valid value is left alone, and so is the variable when that folder cannot be made private.

/// Points `XDG_RUNTIME_DIR` at a private folder when it is unset or invalid (see the module docs).
pub(crate) fn ensure() {
    if valid(std::env::var_os("XDG_RUNTIME_DIR")) {
        return;
    }
    if let Some(dir) = private_dir() {
        // SAFETY: called once, from the `OnceLock` that creates the wgpu context, before the
        // Vulkan instance (the C code that reads the variable) exists. Rust's own environment
        // accesses are serialised by std; what remains is C code on another thread calling
        // getenv at this moment, which rumus does not start.
        unsafe { set_runtime_dir(&dir) };
    }
}

/// `set_var`, which is safe to call in edition 2021 but carries edition 2024's contract.
///
/// # Safety
/// No other thread may be reading the environment through C at the same time.
unsafe fn set_runtime_dir(dir: &std::path::Path) {
    std::env::set_var("XDG_RUNTIME_DIR", dir);
}

/// An absolute path to an existing directory, as the Wayland client requires.
fn valid(value: Option<std::ffi::OsString>) -> bool {
    let Some(value) = value else { return false };
    let path = std::path::Path::new(&value);
    path.is_absolute() && path.is_dir()
}

#[cfg(unix)]
fn private_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let dir = std::env::temp_dir().join(format!("rumus-runtime-{uid}"));
    // An existing folder is fine only if it is ours and private (checked below).
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let private = meta.is_dir() && meta.uid() == uid && meta.permissions().mode() & 0o777 == 0o700;
    private.then_some(dir)
}

#[cfg(not(unix))]
fn private_dir() -> Option<std::path::PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn only_absolute_existing_directories_are_valid() {
        assert!(!valid(None));
        assert!(!valid(Some("".into())));
        assert!(!valid(Some("relative/dir".into())));
        assert!(!valid(Some("/no/such/rumus/dir".into())));
        assert!(valid(Some(std::env::temp_dir().into_os_string())));
    }
}
