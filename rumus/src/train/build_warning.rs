//! A warning for the first `fit` of a process when rumus itself was compiled without
//! optimisation: a debug build of the user's crate trains about 100 times slower.

use std::sync::Once;

/// The warning for a build with `debug_assertions` on, none otherwise.
pub(crate) fn build_warning(debug_build: bool) -> Option<&'static str> {
    debug_build.then_some(
        "rumus warning: rumus was compiled without optimisation (a debug build), so training runs about 100x \
         slower; build with `cargo run --release`, or add `[profile.dev.package.\"*\"] opt-level = 3` to your \
         Cargo.toml",
    )
}

/// Prints [`build_warning`] for this build to stderr, once per process.
pub(crate) fn warn_once_if_debug_build() {
    static ONCE: Once = Once::new();
    if let Some(warning) = build_warning(cfg!(debug_assertions)) {
        ONCE.call_once(|| eprintln!("{warning}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_debug_build_is_warned_about_and_the_fix_is_named() {
        let warning = build_warning(true).unwrap();
        assert!(warning.contains("--release") && warning.contains("opt-level = 3"), "{warning}");
        assert!(!warning.contains('\n'));
        assert_eq!(build_warning(false), None);
    }
}
