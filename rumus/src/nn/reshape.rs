//! Shape-only layers: the batch axis is kept, the per-sample axes are rearranged.

use super::{Module, Param};
use crate::layout::numel;
use crate::{Error, RawTensor, Result};

/// `[n, ...] → [n, prod(...)]` (a per-sample scalar `[n]` becomes `[n, 1]`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flatten;

impl Flatten {
    /// The layer (it has no parameters).
    pub fn new() -> Self {
        Flatten
    }
}

impl Module for Flatten {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        match x.rank() {
            0 => Err(Error::shape("Flatten", "input is a scalar; expected [batch, ...]")),
            1 => x.reshape(&[x.shape()[0], 1]),
            _ => x.flatten_from(1),
        }
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        "Flatten".to_string()
    }
}

/// `[n, ...] → [n, sample_shape...]` with the same number of elements per sample.
#[derive(Clone, Debug)]
pub struct Reshape {
    sample_shape: Vec<usize>,
}

impl Reshape {
    /// Reshapes each sample to `sample_shape`, given in full (the macro resolves a `-1` at compile
    /// time); a sample of another element count is [`Error::Shape`] when the layer runs.
    pub fn new(sample_shape: &[usize]) -> Self {
        Reshape { sample_shape: sample_shape.to_vec() }
    }

    /// The per-sample shape produced.
    pub fn sample_shape(&self) -> &[usize] {
        &self.sample_shape
    }
}

impl Module for Reshape {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        if x.rank() == 0 || numel(&x.shape()[1..]) != numel(&self.sample_shape) {
            return Err(Error::shape(
                "Reshape",
                format!(
                    "input {:?}: samples of {} elements cannot be reshaped to {:?} ({} elements)",
                    x.shape(),
                    numel(x.shape().get(1..).unwrap_or(&[])),
                    self.sample_shape,
                    numel(&self.sample_shape)
                ),
            ));
        }
        let mut shape = vec![x.shape()[0]];
        shape.extend_from_slice(&self.sample_shape);
        x.reshape(&shape)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        format!("Reshape({:?})", self.sample_shape)
    }
}
