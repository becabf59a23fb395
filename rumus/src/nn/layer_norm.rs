//! Layer normalisation over the trailing axes.

use super::{join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Normalises each sample over its trailing `normalized_shape` axes, then applies an optional
/// elementwise affine map (weight ones, bias zeros).
pub struct LayerNorm {
    /// Scale `[normalized_shape]` (ones at first), or `None` without an affine map.
    pub weight: Option<Param>,
    /// Shift `[normalized_shape]` (zeros at first), or `None` without an affine map.
    pub bias: Option<Param>,
    normalized_shape: Vec<usize>,
    eps: f32,
}

impl LayerNorm {
    /// Normalises over the trailing axes `normalized_shape` with `eps` added to the variance; with
    /// `elementwise_affine`, a learned weight and bias. An empty shape, a zero size or a negative or
    /// NaN `eps` is an error.
    pub fn new(device: &Device, normalized_shape: &[usize], eps: f32, elementwise_affine: bool) -> Result<Self> {
        if normalized_shape.is_empty() || normalized_shape.contains(&0) {
            return Err(Error::invalid(
                "LayerNorm",
                format!("normalized shape {normalized_shape:?} must be non-empty"),
            ));
        }
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid("LayerNorm", format!("eps {eps} must be non-negative")));
        }
        let (weight, bias) = if elementwise_affine {
            (
                Some(Param::new(RawTensor::ones(normalized_shape, device)?)?),
                Some(Param::new(RawTensor::zeros(normalized_shape, device)?)?),
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm { weight, bias, normalized_shape: normalized_shape.to_vec(), eps })
    }

    /// The trailing per-sample axes each sample is normalised over.
    pub fn normalized_shape(&self) -> &[usize] {
        &self.normalized_shape
    }
}

impl Module for LayerNorm {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.layer_norm(
            &self.normalized_shape,
            self.weight.as_ref().map(|p| p.tensor()),
            self.bias.as_ref().map(|p| p.tensor()),
            self.eps,
        )
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        if let Some(w) = &self.weight {
            visitor(&join_name(prefix, "weight"), w);
        }
        if let Some(b) = &self.bias {
            visitor(&join_name(prefix, "bias"), b);
        }
    }
    fn describe(&self) -> String {
        format!("LayerNorm({:?})", self.normalized_shape)
    }
}
