//! Per-sample affine resampling of image batches (data augmentation): one map per sample,
//! drawn on the host, applied to the whole batch by one kernel on the batch's device. Not
//! differentiable: augmentation transforms data, not parameters.

use crate::backend::WarpArgs;
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// How [`RawTensor::affine_warp`] reads the source image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// The nearest pixel, `floor(s + 0.5)` per axis: exact for integer maps (crops, flips).
    Nearest,
    /// Linear in each axis between the four pixels around the source position.
    Bilinear,
}

impl RawTensor {
    /// Resamples `[n, c, h, w]` through one affine map per sample: `matrices[i] = [a, b, c, d,
    /// e, f]` sends sample `i`'s output pixel at column `x`, row `y` to read its source at
    /// `(a·x + b·y + c, d·x + e·y + f)` (pixel indices), by `mode`; a source outside the image
    /// reads zero. The output has the input's shape. The maps must be finite and one per sample;
    /// an input that requires a gradient is an error (the warp records no backward).
    pub fn affine_warp(&self, matrices: &[[f32; 6]], mode: Interpolation) -> Result<RawTensor> {
        const OP: &str = "affine_warp";
        self.check_f32(OP)?;
        if self.rank() != 4 {
            return Err(Error::shape(
                OP,
                format!("input {:?}: expected [batch, channels, height, width]", self.shape()),
            ));
        }
        let (n, c, h, w) = (self.shape()[0], self.shape()[1], self.shape()[2], self.shape()[3]);
        if matrices.len() != n {
            return Err(Error::shape(OP, format!("input {:?}: {} maps for {n} samples", self.shape(), matrices.len())));
        }
        if let Some(i) = matrices.iter().position(|m| m.iter().any(|v| !v.is_finite())) {
            return Err(Error::invalid(OP, format!("map {i} {:?} is not finite", matrices[i])));
        }
        if self.requires_grad() {
            return Err(Error::invalid(OP, "the warp is not differentiable; detach the input first"));
        }
        let flat: Vec<f32> = matrices.iter().flatten().copied().collect();
        let m = RawTensor::from_vec(flat, &[n, 6], self.device())?;
        let x = self.contiguous()?;
        let args = WarpArgs { batch: n, channels: c, height: h, width: w, bilinear: mode == Interpolation::Bilinear };
        let y = x.device().backend().affine_warp(x.storage(), m.storage(), &args)?;
        Ok(RawTensor::from_kernel(y, x.shape(), x.device()))
    }
}
