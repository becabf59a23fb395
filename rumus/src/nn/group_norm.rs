//! Group normalisation over `[N, C, ...]` (PyTorch's `nn.GroupNorm`).

use super::{join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Splits the channels of `[N, C, ...]` into `groups` groups of consecutive channels, normalises
/// each sample's group over its channels and trailing axes (biased variance, `eps` added), then
/// applies an optional per-channel affine map (weight ones, bias zeros): PyTorch's
/// `nn.GroupNorm(num_groups, num_channels, eps, affine)` with its parameter names.
pub struct GroupNorm {
    /// Scale `[C]` (ones at first), or `None` without an affine map.
    pub weight: Option<Param>,
    /// Shift `[C]` (zeros at first), or `None` without an affine map.
    pub bias: Option<Param>,
    groups: usize,
    channels: usize,
    eps: f32,
}

/// Checks the arguments shared by group and instance normalisation, named `layer`.
pub(super) fn check_norm_args(layer: &'static str, groups: usize, channels: usize, eps: f32) -> Result<()> {
    if channels == 0 || groups == 0 || !channels.is_multiple_of(groups) {
        return Err(Error::invalid(
            layer,
            format!("{groups} groups must divide the {channels} channels (both positive)"),
        ));
    }
    if eps.is_nan() || eps < 0.0 {
        return Err(Error::invalid(layer, format!("eps {eps} must be non-negative")));
    }
    Ok(())
}

/// The per-channel weight (ones) and bias (zeros) of an affine norm, or none.
pub(super) fn channel_affine(device: &Device, channels: usize, affine: bool) -> Result<(Option<Param>, Option<Param>)> {
    if !affine {
        return Ok((None, None));
    }
    Ok((
        Some(Param::new(RawTensor::ones(&[channels], device)?)?),
        Some(Param::new(RawTensor::zeros(&[channels], device)?)?),
    ))
}

/// Visits `weight` and `bias` where present, under PyTorch's names.
pub(super) fn visit_affine(
    weight: Option<&Param>,
    bias: Option<&Param>,
    prefix: &str,
    visitor: &mut dyn FnMut(&str, &Param),
) {
    if let Some(w) = weight {
        visitor(&join_name(prefix, "weight"), w);
    }
    if let Some(b) = bias {
        visitor(&join_name(prefix, "bias"), b);
    }
}

impl GroupNorm {
    /// `groups` groups over `channels` channels with `eps` added to the variance; with `affine`,
    /// a learned weight and bias `[channels]`. A `groups` that does not divide `channels`, a zero
    /// size or a negative or NaN `eps` is an error.
    pub fn new(device: &Device, groups: usize, channels: usize, eps: f32, affine: bool) -> Result<Self> {
        check_norm_args("GroupNorm", groups, channels, eps)?;
        let (weight, bias) = channel_affine(device, channels, affine)?;
        Ok(GroupNorm { weight, bias, groups, channels, eps })
    }

    /// The number of groups the channels are split into.
    pub fn groups(&self) -> usize {
        self.groups
    }
}

impl Module for GroupNorm {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        if x.rank() < 2 || x.shape()[1] != self.channels {
            return Err(Error::shape(
                "GroupNorm",
                format!("input {:?}: expected [batch, {}, ...]", x.shape(), self.channels),
            ));
        }
        x.group_norm(
            self.groups,
            self.weight.as_ref().map(|p| p.tensor()),
            self.bias.as_ref().map(|p| p.tensor()),
            self.eps,
        )
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visit_affine(self.weight.as_ref(), self.bias.as_ref(), prefix, visitor);
    }
    fn describe(&self) -> String {
        format!("GroupNorm({}, {})", self.groups, self.channels)
    }
}
