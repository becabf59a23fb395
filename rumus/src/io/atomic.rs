//! Atomic file replacement: write a temporary file beside the target, flush it to disk, then
//! rename it over the target. A crash or error at any point leaves the old file as it was, and
//! concurrent saves to one path never share a temporary file: the last rename wins whole.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// The longest file name common file systems accept, in bytes.
const NAME_MAX: usize = 255;

/// Attempts at finding an unused temporary name before giving up.
const ATTEMPTS: usize = 16;

/// Saves started by this process, so two saves never draw the same name.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A hidden, unique temporary name beside `path`: `.<name>.<pid>.<counter>.<random>.tmp`,
/// with `<name>` shortened (at a character boundary) so the whole stays within [`NAME_MAX`].
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(count);
    let suffix = format!(".{}.{count}.{:016x}.tmp", std::process::id(), hasher.finish());
    let room = NAME_MAX - 1 - suffix.len();
    let mut end = name.len().min(room);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    path.with_file_name(format!(".{}{suffix}", &name[..end]))
}

/// Creates a fresh temporary file beside `path`; never opens an existing file.
fn create_temp(path: &Path) -> std::io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let temp = temp_path(path);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(ErrorKind::AlreadyExists, "no free temporary name")))
}

/// Replaces `path` with `bytes` atomically (nothing is written where
/// [`writes_files`](super::writes_files) is false: ranks other than 0 of a distributed job).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// [`write_atomic`] in every process, the ranks of a distributed job included: for data
/// downloads, which each rank reads back.
#[cfg(feature = "fetch")]
pub(crate) fn write_atomic_always(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_with(path, |file| file.write_all(bytes))
}

/// Replaces `path` with what `write` writes, atomically: if `write`, the flush or the rename
/// fails, the temporary file is removed and `path` keeps its previous contents. Where
/// [`writes_files`](super::writes_files) is false (ranks other than 0 of a distributed job) it
/// writes nothing and returns `Ok`.
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<()> {
    if !super::writes_files() {
        return Ok(());
    }
    replace_with(path, write)
}

fn replace_with(path: &Path, write: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<()> {
    if path.file_name().is_none() {
        return Err(Error::invalid("save", format!("{} is not a file path", path.display())));
    }
    let (temp, mut file) = create_temp(path).map_err(|e| Error::io(path, e))?;
    let result = (|| -> std::io::Result<()> {
        write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)
    })();
    if let Err(e) = result {
        // The temporary name is ours alone (created with create_new).
        let _ = fs::remove_file(&temp);
        return Err(Error::io(path, e));
    }
    // Persist the rename itself; best effort, as not every platform can sync a directory.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_unique_hidden_and_short() {
        let long = "é".repeat(127) + "x";
        for name in ["a.safetensors", long.as_str()] {
            let a = temp_path(&Path::new("dir").join(name));
            let b = temp_path(&Path::new("dir").join(name));
            assert_ne!(a, b);
            let file = a.file_name().unwrap().to_str().unwrap();
            assert!(file.starts_with('.') && file.ends_with(".tmp"), "{file}");
            assert!(file.len() <= NAME_MAX, "{} bytes", file.len());
            assert_eq!(a.parent(), Some(Path::new("dir")));
        }
    }
}
