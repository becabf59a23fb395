//! Upsampling of `[n, c, h, w]` by integer factors, written with existing differentiable ops.
//!
//! Nearest: each pixel repeated `sh × sw` times, a broadcast view made contiguous (its backward
//! sums each block). Bilinear (`align_corners = false`, PyTorch's rule): separable, so
//! `y = A_h · x · A_wᵀ` with constant interpolation matrices `A` (two non-zeros a row); the
//! backward is the transposed products.

use crate::layout::checked_mul;
use crate::tensor::RawTensor;
use crate::{Device, Error, Result};

/// How [`RawTensor::upsample2d`] fills the new pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsampleMode {
    /// Each output pixel copies the input pixel `floor(i / scale)`.
    Nearest,
    /// Linear in each axis between the two nearest input pixels, with PyTorch's
    /// `align_corners = False` source positions `(i + 0.5) / scale − 0.5`, clamped at 0.
    Bilinear,
}

/// The `[size · scale, size]` matrix of 1-D linear interpolation with `align_corners = False`.
fn linear_weights(op: &'static str, size: usize, scale: usize, device: &Device) -> Result<RawTensor> {
    let out = checked_mul(op, "upsampled size", size, scale)?;
    let mut a = vec![0.0f32; checked_mul(op, "interpolation matrix", out, size)?];
    for (i, row) in a.chunks_mut(size).enumerate() {
        // PyTorch's area_pixel_compute_source_index, computed in f64.
        let src = ((i as f64 + 0.5) / scale as f64 - 0.5).max(0.0);
        let i0 = (src.floor() as usize).min(size - 1);
        let i1 = (i0 + 1).min(size - 1);
        let lambda = (src - i0 as f64) as f32;
        row[i0] += 1.0 - lambda;
        row[i1] += lambda;
    }
    RawTensor::from_vec(a, &[out, size], device)
}

impl RawTensor {
    /// Upsamples `[n, c, h, w]` to `[n, c, h·sh, w·sw]` by the integer factors `scale`
    /// `(sh, sw)` (PyTorch's `Upsample(scale_factor=(sh, sw), mode=…)`).
    pub fn upsample2d(&self, scale: (usize, usize), mode: UpsampleMode) -> Result<RawTensor> {
        const OP: &str = "upsample2d";
        self.check_f32(OP)?;
        if self.rank() != 4 || self.shape()[2] == 0 || self.shape()[3] == 0 {
            return Err(Error::shape(
                OP,
                format!(
                    "input {:?}: expected rank 4 [batch, channels, height, width] with a non-empty plane",
                    self.shape()
                ),
            ));
        }
        let (sh, sw) = scale;
        if sh == 0 || sw == 0 {
            return Err(Error::invalid(OP, format!("scale {scale:?} must be positive")));
        }
        let (n, c, h, w) = (self.shape()[0], self.shape()[1], self.shape()[2], self.shape()[3]);
        let (oh, ow) = (checked_mul(OP, "height", h, sh)?, checked_mul(OP, "width", w, sw)?);
        crate::layout::checked_numel(OP, &[n, c, oh, ow])?;
        match mode {
            UpsampleMode::Nearest => self
                .contiguous()?
                .reshape(&[n, c, h, 1, w, 1])?
                .broadcast_to(&[n, c, h, sh, w, sw])?
                .contiguous()?
                .reshape(&[n, c, oh, ow]),
            UpsampleMode::Bilinear => {
                let a_h = linear_weights(OP, h, sh, self.device())?;
                let a_w = linear_weights(OP, w, sw, self.device())?;
                // [n, c, h, w] @ [w, ow] → [n, c, h, ow]; [oh, h] @ that → [n, c, oh, ow].
                let rows = self.matmul(&a_w.transpose(0, 1)?)?;
                a_h.matmul(&rows)
            }
        }
    }
}
