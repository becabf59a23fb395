//! Fully connected layer: `y = x Wᵀ + b`.

use super::{init, Module, Param};
use crate::{Device, RawTensor, Result};

/// `Linear(in => out)`: weight `[out, in]`, bias `[out]` (PyTorch layout and names).
pub struct Linear {
    /// `[out_features, in_features]`; the output is `x @ weightᵀ + bias`.
    pub weight: Param,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Param>,
    in_features: usize,
    out_features: usize,
}

impl Linear {
    /// PyTorch's default init: weight and bias uniform in `±1/sqrt(in_features)`.
    ///
    /// ```
    /// use rumus::nn::{Linear, Module};
    /// use rumus::{Device, RawTensor};
    ///
    /// let device = Device::cpu();
    /// let layer = Linear::new(&device, 3, 2, true, 0)?;
    /// assert_eq!(layer.weight.shape(), [2, 3]);
    /// let y = layer.forward_raw(&RawTensor::ones(&[4, 3], &device)?)?;
    /// assert_eq!(y.shape(), [4, 2]);
    /// assert!(layer.forward_raw(&RawTensor::ones(&[4, 5], &device)?).is_err());
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn new(device: &Device, in_features: usize, out_features: usize, bias: bool, seed: u64) -> Result<Self> {
        let bound = 1.0 / (in_features.max(1) as f32).sqrt();
        let weight = Param::new(init::uniform(&[out_features, in_features], bound, seed, device)?)?;
        let bias = if bias {
            Some(Param::new(init::uniform(&[out_features], bound, seed.wrapping_add(1), device)?)?)
        } else {
            None
        };
        Ok(Linear { weight, bias, in_features, out_features })
    }
}

impl Module for Linear {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let y = x.matmul(&self.weight.tensor().transpose(0, 1)?)?;
        match &self.bias {
            Some(b) => y.add(b.tensor()),
            None => Ok(y),
        }
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&super::join_name(prefix, "weight"), &self.weight);
        if let Some(b) = &self.bias {
            visitor(&super::join_name(prefix, "bias"), b);
        }
    }

    fn describe(&self) -> String {
        format!("Linear({} => {})", self.in_features, self.out_features)
    }
}
