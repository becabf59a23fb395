//! Residual connection around a sequence of layers.

use super::{Module, Param, Sequential};
use crate::{Error, RawTensor, Result};

/// `y = x + inner(x)`. The inner layers' parameters keep their own names under the residual's
/// prefix (`<prefix>.0.weight`, ...), as if the residual were transparent.
pub struct Residual {
    inner: Sequential,
}

impl Residual {
    pub fn new(inner: Sequential) -> Self {
        Residual { inner }
    }

    pub fn inner(&self) -> &Sequential {
        &self.inner
    }
}

impl Module for Residual {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let branch = self.inner.forward_raw(x)?;
        // Exact shapes: broadcasting here would silently hide a wrong inner block.
        if branch.shape() != x.shape() {
            return Err(Error::shape(
                "Residual",
                format!(
                    "input {:?}: inner layers produce {:?}, which cannot be added to it",
                    x.shape(),
                    branch.shape()
                ),
            ));
        }
        x.add(&branch)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.inner.visit_params(prefix, visitor);
    }
    fn set_training(&mut self, training: bool) {
        self.inner.set_training(training);
    }
    fn describe(&self) -> String {
        format!("Residual({})", self.inner.describe())
    }
}
