//! `ImageFolder`: a class per subfolder of PNG and JPEG images (torchvision's `ImageFolder`),
//! decoded when loaded.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;

use super::{Class, ClassDataset, Dataset};
use crate::{Device, Error, RawTensor, Result, Shape, Tensor};

const OP: &str = "ImageFolder::load";

/// Images under `root/<class>/<image>` with the class of their folder: classes are the
/// subfolders' names in sorted order (class 0 the first), images are the `.png`, `.jpg` and
/// `.jpeg` files of each (by extension, any case; other files are skipped), in sorted order.
///
/// Every image is decoded when the dataset is loaded (PNG and JPEG through the `image` crate),
/// converted to the sample's channel count (`[1, H, W]`: luma; `[3, H, W]`: RGB; alpha dropped),
/// resized to its `H×W` (bilinear, aspect ratio not kept) and scaled to `[0, 1]`; the samples
/// then live in a [`ClassDataset`] of `4·C·H·W` bytes per image, on the device after the first
/// batch like any in-memory dataset. (Decoding at load costs memory, not time per epoch; a
/// folder too large for memory needs a dataset that decodes per batch.)
///
/// Errors ([`Error::Data`] unless said): a sample shape that is not `[1 | 3, H, W]` with
/// `H, W > 0` ([`Error::Shape`]), a missing or unreadable folder or file ([`Error::Io`] naming
/// it), a number of class folders other than `N`, a class folder without images, a file that
/// does not decode ([`Error::Format`] naming the file).
///
/// ```
/// use rumus::data::{Dataset, ImageFolder};
/// use rumus::Shape3;
///
/// let root = std::env::temp_dir().join(format!("rumus-image-folder-doc-{}", std::process::id()));
/// for (class, shade) in [("cat", 40u8), ("dog", 200)] {
///     std::fs::create_dir_all(root.join(class)).unwrap();
///     let img = image::GrayImage::from_pixel(5, 7, image::Luma([shade]));
///     img.save(root.join(class).join("a.png")).unwrap();
/// }
/// let data = ImageFolder::<Shape3<1, 4, 4>, 2>::load(&root)?;
/// assert_eq!(data.classes(), ["cat", "dog"]);
/// assert_eq!(data.len(), 2);
/// let (images, labels) = data.get_batch(&[1], &rumus::Device::cpu())?;
/// assert!((images.raw().to_vec()?[0] - 200.0 / 255.0).abs() < 1e-6);
/// assert_eq!(labels.to_vec_u32()?, [1]);
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), rumus::Error>(())
/// ```
pub struct ImageFolder<S: Shape, const N: usize> {
    data: ClassDataset<S, N>,
    classes: Vec<String>,
    files: Vec<PathBuf>,
}

impl<S: Shape, const N: usize> Clone for ImageFolder<S, N> {
    fn clone(&self) -> Self {
        ImageFolder { data: self.data.clone(), classes: self.classes.clone(), files: self.files.clone() }
    }
}

impl<S: Shape, const N: usize> std::fmt::Debug for ImageFolder<S, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImageFolder<{:?}, {N}>({} images of {:?})", S::DIMS, self.files.len(), self.classes)
    }
}

/// The sorted entries of `dir` that are folders (`want_dirs`) or image files.
fn entries(dir: &Path, want_dirs: bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let keep = if want_dirs {
            path.is_dir()
        } else {
            path.is_file()
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| ["png", "jpg", "jpeg"].contains(&e.to_ascii_lowercase().as_str()))
        };
        if keep {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The image at `path` as `channels × height × width` values in `[0, 1]`, channel-major.
fn decode(path: &Path, channels: usize, height: u32, width: u32) -> Result<Vec<f32>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let img = image::load_from_memory(&bytes).map_err(|e| Error::format(path, format!("not a readable image: {e}")))?;
    let img = if (img.width(), img.height()) == (width, height) {
        img
    } else {
        img.resize_exact(width, height, FilterType::Triangle)
    };
    let plane = (height * width) as usize;
    let mut out = vec![0.0; channels * plane];
    if channels == 1 {
        for (o, p) in out.iter_mut().zip(img.to_luma8().pixels()) {
            *o = f32::from(p.0[0]) / 255.0;
        }
    } else {
        for (i, p) in img.to_rgb8().pixels().enumerate() {
            for c in 0..3 {
                out[c * plane + i] = f32::from(p.0[c]) / 255.0;
            }
        }
    }
    Ok(out)
}

impl<S: Shape, const N: usize> ImageFolder<S, N> {
    /// Loads every image under `root` (see [`ImageFolder`]).
    pub fn load(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        let (channels, height, width) = match *S::DIMS {
            [c @ (1 | 3), h, w] if h > 0 && w > 0 => (c, h, w),
            _ => {
                return Err(Error::shape(
                    OP,
                    format!("samples of shape {:?}: expected [channels, height, width] with 1 or 3 channels", S::DIMS),
                ))
            }
        };
        let (h, w) = (
            u32::try_from(height).map_err(|_| Error::shape(OP, format!("height {height} is too large")))?,
            u32::try_from(width).map_err(|_| Error::shape(OP, format!("width {width} is too large")))?,
        );
        let folders = entries(root, true)?;
        if folders.len() != N {
            return Err(Error::Data(format!(
                "{OP}: {} has {} class folders, the dataset's type says {N} classes (Class<{N}>)",
                root.display(),
                folders.len()
            )));
        }
        let per_image = crate::layout::checked_numel(OP, S::DIMS)?;
        let (mut data, mut labels, mut files, mut classes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (label, folder) in folders.iter().enumerate() {
            let images = entries(folder, false)?;
            if images.is_empty() {
                return Err(Error::Data(format!("{OP}: class folder {} has no PNG or JPEG image", folder.display())));
            }
            let total =
                crate::layout::checked_mul(OP, "the images' values", data.len() / per_image + images.len(), per_image)?;
            data.try_reserve(total - data.len()).map_err(|_| Error::OutOfMemory {
                op: OP,
                bytes: total as u128 * 4,
                detail: "the decoded images do not fit in memory".into(),
            })?;
            for file in images {
                data.extend(decode(&file, channels, h, w)?);
                labels.push(label as u32);
                files.push(file);
            }
            classes.push(folder.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
        }
        Ok(ImageFolder { data: ClassDataset::new(data, labels)?, classes, files })
    }

    /// The class names (the subfolders), class `i` at position `i`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The image files, in sample order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The decoded samples and labels as a [`ClassDataset`] (shared, no copy).
    pub fn dataset(&self) -> &ClassDataset<S, N> {
        &self.data
    }
}

impl<S: Shape, const N: usize> Dataset for ImageFolder<S, N> {
    type Sample = S;
    type Target = Class<N>;

    fn len(&self) -> usize {
        self.data.len()
    }

    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<S>, RawTensor)> {
        self.data.get_batch(indices, device)
    }
}
