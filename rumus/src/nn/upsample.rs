//! Upsampling layer.

use super::conv::pair;
use super::{Module, Param};
use crate::{RawTensor, Result, UpsampleMode};

/// `Upsample(scale, mode)`: `[n, c, h, w]` → `[n, c, h·sh, w·sw]` by integer factors
/// (PyTorch's `nn.Upsample(scale_factor=…, mode='nearest' | 'bilinear')`, bilinear with
/// `align_corners=False`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upsample {
    /// Integer scale factors `(sh, sw)`: `[C, H, W]` → `[C, sh·H, sw·W]`.
    pub scale: (usize, usize),
    /// How new pixels are computed: nearest neighbour or bilinear.
    pub mode: UpsampleMode,
}

impl Upsample {
    /// Upsampling by `scale` `(sh, sw)`; checked when the layer runs.
    pub fn new(scale: (usize, usize), mode: UpsampleMode) -> Self {
        Upsample { scale, mode }
    }
}

impl Module for Upsample {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.upsample2d(self.scale, self.mode)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        let mode = match self.mode {
            UpsampleMode::Nearest => "nearest",
            UpsampleMode::Bilinear => "bilinear",
        };
        format!("Upsample({}, mode = {mode})", pair(self.scale))
    }
}
