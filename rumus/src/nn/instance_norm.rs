//! Instance normalisation of images `[N, C, H, W]` (PyTorch's `nn.InstanceNorm2d`).

use super::group_norm::{channel_affine, check_norm_args, visit_affine};
use super::{Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Normalises each sample's channel over its `H·W` pixels (biased variance, `eps` added), with an
/// optional per-channel affine map: PyTorch's `nn.InstanceNorm2d(num_features, eps, affine)`
/// without running statistics (`track_running_stats = False`, its default), so training and
/// evaluation compute the same thing. Group normalisation with one channel per group.
pub struct InstanceNorm2d {
    /// Scale `[C]` (ones at first) with `affine`, else `None` (PyTorch's default).
    pub weight: Option<Param>,
    /// Shift `[C]` (zeros at first) with `affine`, else `None`.
    pub bias: Option<Param>,
    channels: usize,
    eps: f32,
}

impl InstanceNorm2d {
    /// `channels` channels with `eps` added to the variance; with `affine`, a learned weight and
    /// bias `[channels]`. A zero `channels` or a negative or NaN `eps` is an error.
    pub fn new(device: &Device, channels: usize, eps: f32, affine: bool) -> Result<Self> {
        check_norm_args("InstanceNorm2d", channels, channels, eps)?;
        let (weight, bias) = channel_affine(device, channels, affine)?;
        Ok(InstanceNorm2d { weight, bias, channels, eps })
    }
}

impl Module for InstanceNorm2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        if x.rank() != 4 || x.shape()[1] != self.channels {
            return Err(Error::shape(
                "InstanceNorm2d",
                format!("input {:?}: expected [batch, {}, H, W]", x.shape(), self.channels),
            ));
        }
        x.group_norm(
            self.channels,
            self.weight.as_ref().map(|p| p.tensor()),
            self.bias.as_ref().map(|p| p.tensor()),
            self.eps,
        )
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visit_affine(self.weight.as_ref(), self.bias.as_ref(), prefix, visitor);
    }
    fn describe(&self) -> String {
        format!("InstanceNorm2d({})", self.channels)
    }
}
