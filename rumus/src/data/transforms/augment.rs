//! [`Augment`]: a seeded pipeline of transforms applied to each training batch.

use super::affine_map::AffineMap;
use super::{HorizontalFlip, Normalize, RandomAffine, RandomCrop};
use crate::rng::Rng;
use crate::{Error, Interpolation, RawTensor, Result};

/// One step of a pipeline.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Crop(RandomCrop),
    Flip(HorizontalFlip),
    Affine(RandomAffine),
    Normalize(Normalize),
}

/// Data augmentation of image batches `[n, c, h, w]`, applied on the fly to the training
/// batches of `fit` (`Fit::augment`) or of a [`DataLoader`](crate::data::DataLoader)
/// (`DataLoader::augment`), never to evaluation.
///
/// The steps run in the order they were added. Consecutive geometric steps (crops, flips,
/// affine maps) compose into one affine map per sample, drawn on the host, and one warp of the
/// whole batch on the batch's device: nearest-pixel (exact) for crops and flips, bilinear when an
/// affine step is among them, zeros outside the image. [`Normalize`] is a per-channel affine map
/// of the values where it stands. The sample at position `p` of epoch `e`'s order draws from a
/// stream that depends only on `(seed, e, p)`, so a run is reproducible and a sample's transform
/// does not depend on the batch size, nor, in data-parallel training, on the number of ranks.
///
/// ```
/// use rumus::data::transforms::Augment;
/// # fn main() -> rumus::Result<()> {
/// // CIFAR-style: shift by up to 4 pixels, mirror half the images, normalise.
/// let augment = Augment::new(7)
///     .random_crop(4)?
///     .horizontal_flip(0.5)?
///     .normalize(&[0.49, 0.48, 0.45], &[0.25, 0.24, 0.26])?;
/// # let _ = augment;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Augment {
    seed: u64,
    steps: Vec<Step>,
}

impl Augment {
    /// An empty pipeline (the identity) whose random draws come from `seed`.
    pub fn new(seed: u64) -> Self {
        Augment { seed, steps: Vec::new() }
    }

    /// Adds a [`RandomCrop`] with `padding` pixels of zeros on each side (image size kept).
    pub fn random_crop(self, padding: usize) -> Result<Self> {
        self.then(Step::Crop(RandomCrop { padding }))
    }

    /// Adds a [`HorizontalFlip`] with probability `p` in `[0, 1]`.
    pub fn horizontal_flip(self, p: f32) -> Result<Self> {
        self.then(Step::Flip(HorizontalFlip { p }))
    }

    /// Adds a [`RandomAffine`] (its ranges checked).
    pub fn random_affine(self, affine: RandomAffine) -> Result<Self> {
        self.then(Step::Affine(affine))
    }

    /// Adds a [`Normalize`] with one mean and one positive standard deviation per channel.
    pub fn normalize(self, mean: &[f32], std: &[f32]) -> Result<Self> {
        self.then(Step::Normalize(Normalize { mean: mean.to_vec(), std: std.to_vec() }))
    }

    fn then(mut self, step: Step) -> Result<Self> {
        match &step {
            Step::Crop(s) => s.check()?,
            Step::Flip(s) => s.check()?,
            Step::Affine(s) => s.check()?,
            Step::Normalize(s) => s.check()?,
        }
        self.steps.push(step);
        Ok(self)
    }

    /// The seed of the pipeline's draws.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// True when the pipeline has no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Transforms the batch `[n, c, h, w]` of epoch `epoch` whose samples are at positions
    /// `first..first + n` of the epoch's order: sample `i` draws from a stream of
    /// `(seed, epoch, first + i)` alone, so the same sample at the same position gets the same
    /// transform whichever batch holds it. Another rank, or channels that do not match a
    /// `Normalize`, is an error.
    pub fn apply(&self, x: &RawTensor, epoch: usize, first: usize) -> Result<RawTensor> {
        if self.steps.is_empty() {
            return Ok(x.clone());
        }
        if x.rank() != 4 {
            return Err(Error::shape(
                "Augment",
                format!("batch {:?}: the transforms take images [batch, channels, height, width]", x.shape()),
            ));
        }
        let (n, h, w) = (x.shape()[0], x.shape()[2], x.shape()[3]);
        let key = self.seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut rngs: Vec<Rng> = (0..n)
            .map(|i| Rng::new(key ^ (first.wrapping_add(i) as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)))
            .collect();
        let mut out = x.detach();
        // The pending run of geometric steps: per sample, the map from output to source pixel.
        let mut maps: Option<Vec<AffineMap>> = None;
        let mut bilinear = false;
        for step in &self.steps {
            let draw = |rng: &mut Rng| match step {
                Step::Crop(s) => s.draw(rng),
                Step::Flip(s) => s.draw(rng, w),
                Step::Affine(s) => s.draw(rng, h, w),
                Step::Normalize(_) => AffineMap::IDENTITY,
            };
            if let Step::Normalize(s) = step {
                out = warp(&out, maps.take(), bilinear)?;
                bilinear = false;
                out = s.apply(&out)?;
                continue;
            }
            bilinear |= matches!(step, Step::Affine(_));
            // Later steps act on the output: source = earlier(later(output)).
            let pending = maps.get_or_insert_with(|| vec![AffineMap::IDENTITY; n]);
            for (m, rng) in pending.iter_mut().zip(&mut rngs) {
                *m = m.after(&draw(rng));
            }
        }
        warp(&out, maps, bilinear)
    }
}

/// `x` warped through `maps` (one per sample), or `x` itself without a pending run.
fn warp(x: &RawTensor, maps: Option<Vec<AffineMap>>, bilinear: bool) -> Result<RawTensor> {
    let Some(maps) = maps else { return Ok(x.clone()) };
    let coefficients: Vec<[f32; 6]> = maps.into_iter().map(AffineMap::to_f32).collect();
    x.affine_warp(&coefficients, if bilinear { Interpolation::Bilinear } else { Interpolation::Nearest })
}
