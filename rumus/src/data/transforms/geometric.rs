//! The geometric transforms: each draws, per sample, the map from an output pixel to the pixel
//! it reads (the inverse of the transform), so that a run of them composes into one warp.

use super::affine_map::AffineMap;
use crate::rng::Rng;
use crate::{Error, Result};

/// A random shift of up to `padding` pixels on each axis with zeros shifted in, the image size
/// kept: torchvision's `RandomCrop(size, padding)` with `size` the image's own (pad by `padding`
/// on every side, then cut the original size at a uniformly drawn integer offset). Exact: whole
/// pixels move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomCrop {
    /// Zero padding on each side, in pixels; the offset is drawn from `0..=2·padding` per axis.
    pub padding: usize,
}

/// A left-right mirror with probability `p`: torchvision's `RandomHorizontalFlip(p)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HorizontalFlip {
    /// The probability of flipping a sample, in `[0, 1]`.
    pub p: f32,
}

/// A random rotation, translation, scale and shear about the image centre, read bilinearly with
/// zeros outside: torchvision's `RandomAffine(degrees, translate, scale, shear)` (the angle and
/// the x shear uniform in `[-degrees, degrees]` and `[-shear, shear]`, the shifts whole pixels
/// uniform in `[-translate·W, translate·W]` and `[-translate·H, translate·H]`, the scale uniform
/// in `scale`). A positive angle turns the image counter-clockwise as displayed (rows down).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomAffine {
    /// The largest rotation, in degrees, in `[0, 180]`.
    pub degrees: f32,
    /// The largest shift as fractions `(x, y)` of the width and height, each in `[0, 1]`.
    pub translate: (f32, f32),
    /// The range `(low, high)` of the scale factor, `0 < low ≤ high`.
    pub scale: (f32, f32),
    /// The largest shear along x, in degrees, in `[0, 90)`.
    pub shear: f32,
}

impl Default for RandomAffine {
    /// The identity: no rotation, shift, scaling or shear.
    fn default() -> Self {
        RandomAffine { degrees: 0.0, translate: (0.0, 0.0), scale: (1.0, 1.0), shear: 0.0 }
    }
}

/// Uniform in `[low, high]` from the stream.
fn uniform_in(rng: &mut Rng, low: f64, high: f64) -> f64 {
    low + (high - low) * rng.uniform() as f64
}

/// A whole number of pixels uniform in `[-max, max]`, drawn as torchvision rounds it.
fn shift(rng: &mut Rng, max: f64) -> f64 {
    uniform_in(rng, -max, max).round()
}

impl RandomCrop {
    pub(crate) fn check(&self) -> Result<()> {
        if self.padding > 1 << 24 {
            return Err(Error::invalid("RandomCrop", format!("padding {} exceeds 2^24 pixels", self.padding)));
        }
        Ok(())
    }

    /// Output `(x, y)` reads `(x + j - padding, y + i - padding)` for the drawn offset `(i, j)`.
    pub(crate) fn draw(&self, rng: &mut Rng) -> AffineMap {
        let range = 2 * self.padding + 1;
        let i = rng.below(range) as f64 - self.padding as f64;
        let j = rng.below(range) as f64 - self.padding as f64;
        AffineMap::translation(j, i)
    }
}

impl HorizontalFlip {
    pub(crate) fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.p) {
            return Err(Error::invalid("HorizontalFlip", format!("probability {} must be in [0, 1]", self.p)));
        }
        Ok(())
    }

    /// Output `(x, y)` reads `(width - 1 - x, y)` when the sample flips (one draw per sample).
    pub(crate) fn draw(&self, rng: &mut Rng, width: usize) -> AffineMap {
        if rng.uniform() < self.p {
            AffineMap([-1.0, 0.0, width as f64 - 1.0, 0.0, 1.0, 0.0])
        } else {
            AffineMap::IDENTITY
        }
    }
}

impl RandomAffine {
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::invalid("RandomAffine", what));
        if !(0.0..=180.0).contains(&self.degrees) {
            return bad(format!("degrees {} must be in [0, 180]", self.degrees));
        }
        let (tx, ty) = self.translate;
        if !(0.0..=1.0).contains(&tx) || !(0.0..=1.0).contains(&ty) {
            return bad(format!("translate {:?} must be fractions in [0, 1]", self.translate));
        }
        let (lo, hi) = self.scale;
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= hi) {
            return bad(format!("scale {:?} must be a range 0 < low <= high", self.scale));
        }
        if !(0.0..90.0).contains(&self.shear) {
            return bad(format!("shear {} must be in [0, 90) degrees", self.shear));
        }
        Ok(())
    }

    /// The inverse of `x ↦ centre + shift + R·Sh·s·(x - centre)` for one drawn sample.
    pub(crate) fn draw(&self, rng: &mut Rng, height: usize, width: usize) -> AffineMap {
        let angle = uniform_in(rng, -self.degrees as f64, self.degrees as f64).to_radians();
        let dx = shift(rng, self.translate.0 as f64 * width as f64);
        let dy = shift(rng, self.translate.1 as f64 * height as f64);
        let s = uniform_in(rng, self.scale.0 as f64, self.scale.1 as f64);
        let shear = uniform_in(rng, -self.shear as f64, self.shear as f64).to_radians().tan();
        let (sin, cos) = angle.sin_cos();
        // Rows grow downwards, so turning counter-clockwise as displayed is (cos, sin; -sin, cos).
        let rotate = AffineMap([cos, sin, 0.0, -sin, cos, 0.0]);
        let linear = rotate.after(&AffineMap([s, s * shear, 0.0, 0.0, s, 0.0]));
        let (cx, cy) = ((width as f64 - 1.0) / 2.0, (height as f64 - 1.0) / 2.0);
        let forward = AffineMap::translation(cx + dx, cy + dy).after(&linear).after(&AffineMap::translation(-cx, -cy));
        // The scale is positive and the shear below 90°, so the map is invertible.
        forward.inverse().unwrap_or(AffineMap::IDENTITY)
    }
}
