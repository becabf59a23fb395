//! Layer normalisation over the trailing axes.

use super::{join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Normalises each sample over its trailing `normalized_shape` axes, then applies an optional
/// elementwise affine map (weight ones, bias zeros).
pub struct LayerNorm {
    pub weight: Option<Param>,
    pub bias: Option<Param>,
    normalized_shape: Vec<usize>,
    eps: f32,
}

impl LayerNorm {
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
