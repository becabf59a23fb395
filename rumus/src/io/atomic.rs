//! Atomic file replacement: write a temporary file beside the target, flush it to disk, then
//! rename it over the target. A crash or error at any point leaves the old file as it was.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The temporary file used while replacing `path`: `<name>.tmp` in the same folder (a rename
/// is only atomic within one file system).
fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// Replaces `path` with what `write` writes, atomically: if `write`, the flush or the rename
/// fails, the temporary file is removed and `path` keeps its previous contents.
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<()> {
    if path.file_name().is_none() {
        return Err(Error::invalid("save", format!("{} is not a file path", path.display())));
    }
    let temp = temp_path(path);
    let result = (|| -> std::io::Result<()> {
        let mut file = File::create(&temp)?;
        write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if let Err(e) = result {
        // Only a file we created is removed; a directory squatting on the name is not ours.
        if temp.is_file() {
            let _ = fs::remove_file(&temp);
        }
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
