//! RMS normalisation over the trailing axes (PyTorch's `nn.RMSNorm`), as in LLaMA-style
//! transformers.

use super::{join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// rumus's default `eps` of [`RmsNorm`]: `1e-6`, LLaMA's. (PyTorch's `nn.RMSNorm` defaults to
/// `eps=None`, the float32 machine epsilon `1.19e-7`; pass that value for its exact behaviour.)
pub const RMS_NORM_EPS: f32 = 1e-6;

/// Divides each sample by its root mean square over the trailing `normalized_shape` axes,
/// `x / √(mean(x²) + eps)`, then scales elementwise by an optional `weight` (ones at first):
/// PyTorch's `nn.RMSNorm(normalized_shape, eps, elementwise_affine)` and its name `weight`.
/// Forward and backward run the device's fused kernels.
pub struct RmsNorm {
    /// Scale `[normalized_shape]` (ones at first), or `None` without an affine map.
    pub weight: Option<Param>,
    normalized_shape: Vec<usize>,
    eps: f32,
}

impl RmsNorm {
    /// Normalises over the trailing axes `normalized_shape` with `eps` added to the mean square
    /// ([`RMS_NORM_EPS`] is rumus's default); with `elementwise_affine`, a learned weight. An
    /// empty shape, a zero size or a negative or NaN `eps` is an error.
    pub fn new(device: &Device, normalized_shape: &[usize], eps: f32, elementwise_affine: bool) -> Result<Self> {
        if normalized_shape.is_empty() || normalized_shape.contains(&0) {
            return Err(Error::invalid("RmsNorm", format!("normalized shape {normalized_shape:?} must be non-empty")));
        }
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid("RmsNorm", format!("eps {eps} must be non-negative")));
        }
        let weight =
            if elementwise_affine { Some(Param::new(RawTensor::ones(normalized_shape, device)?)?) } else { None };
        Ok(RmsNorm { weight, normalized_shape: normalized_shape.to_vec(), eps })
    }

    /// The trailing per-sample axes each sample is normalised over.
    pub fn normalized_shape(&self) -> &[usize] {
        &self.normalized_shape
    }
}

impl Module for RmsNorm {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.rms_norm(&self.normalized_shape, self.weight.as_ref().map(|p| p.tensor()), self.eps)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        if let Some(w) = &self.weight {
            visitor(&join_name(prefix, "weight"), w);
        }
    }
    fn describe(&self) -> String {
        format!("RmsNorm({:?})", self.normalized_shape)
    }
}
