//! Residual connection around a sequence of layers.

use super::{KvCache, Module, Param, Sequential};
use crate::{Error, RawTensor, Result};

/// `y = x + inner(x)`. The inner layers' parameters keep their own names under the residual's
/// prefix (`<prefix>.0.weight`, ...), as if the residual were transparent.
pub struct Residual {
    inner: Sequential,
}

impl Residual {
    /// `x + inner(x)`; `inner` must keep the shape (checked when it runs).
    pub fn new(inner: Sequential) -> Self {
        Residual { inner }
    }

    /// The wrapped layers.
    pub fn inner(&self) -> &Sequential {
        &self.inner
    }
}

impl Module for Residual {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        add_branch(x, &self.inner.forward_raw(x)?)
    }
    /// `x + inner(x)` with the cache passed to the inner layers.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        add_branch(x, &self.inner.forward_cached(x, cache)?)
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

/// `x + branch`, with exact shapes: broadcasting here would silently hide a wrong inner block.
fn add_branch(x: &RawTensor, branch: &RawTensor) -> Result<RawTensor> {
    if branch.shape() != x.shape() {
        return Err(Error::shape(
            "Residual",
            format!("input {:?}: inner layers produce {:?}, which cannot be added to it", x.shape(), branch.shape()),
        ));
    }
    x.add(branch)
}
