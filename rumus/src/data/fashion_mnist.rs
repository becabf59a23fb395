//! Fashion-MNIST (Xiao et al., 2017): Zalando's 28×28 grey clothing images in MNIST's format,
//! 60,000 training and 10,000 test images, 10 classes (see [`CLASSES`]).
//!
//! Pixels are scaled to `[0, 1]` and normalised with the training set's mean 0.2860 and
//! standard deviation 0.3530.

use std::path::Path;

use super::mnist::{load_dir, Mnist};
use crate::Result;

/// Mean of Fashion-MNIST's training pixels (after scaling to `[0, 1]`).
pub const MEAN: f32 = 0.2860;
/// Standard deviation of Fashion-MNIST's training pixels (after scaling to `[0, 1]`).
pub const STD: f32 = 0.3530;

/// Where Debian's `dataset-fashion-mnist` package installs the gzipped IDX files.
pub const DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Class names by label.
pub const CLASSES: [&str; 10] =
    ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];

/// Loads `(train, test)` from the four IDX files (raw or `.gz`) in `dir`, e.g. [`DEBIAN_DIR`].
pub fn load(dir: impl AsRef<Path>) -> Result<(Mnist, Mnist)> {
    load_dir(dir.as_ref(), MEAN, STD, &|dir, name| {
        format!(
            "Fashion-MNIST file {name}.gz not found in {}; on Debian/Ubuntu `apt-get install dataset-fashion-mnist` \
             puts the files in {DEBIAN_DIR}; otherwise copy the four IDX files into that folder",
            dir.display()
        )
    })
}
