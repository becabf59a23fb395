//! Residual connection around a sequence of layers, with an optional projection shortcut.

use super::{join_name, KvCache, Module, Param, Sequential};
use crate::{Error, RawTensor, Result};

/// `y = x + inner(x)`, or `y = shortcut(x) + inner(x)` with a projection shortcut (ResNet's
/// downsampling block: a strided 1×1 convolution and batch norm beside the main path).
///
/// The inner layers' parameters keep their own names under the residual's prefix
/// (`<prefix>.0.weight`, ...), as if the residual were transparent; the shortcut's follow them
/// under `<prefix>.shortcut` (`<prefix>.shortcut.0.weight`, ...).
pub struct Residual {
    inner: Sequential,
    shortcut: Option<Sequential>,
}

impl Residual {
    /// `x + inner(x)`; `inner` must keep the shape (checked when it runs).
    pub fn new(inner: Sequential) -> Self {
        Residual { inner, shortcut: None }
    }

    /// `shortcut(x) + inner(x)`; both branches must produce the same shape (checked when it
    /// runs).
    pub fn with_shortcut(inner: Sequential, shortcut: Sequential) -> Self {
        Residual { inner, shortcut: Some(shortcut) }
    }

    /// The wrapped layers.
    pub fn inner(&self) -> &Sequential {
        &self.inner
    }

    /// The projection shortcut's layers; `None` when the shortcut is the identity.
    pub fn shortcut(&self) -> Option<&Sequential> {
        self.shortcut.as_ref()
    }

    /// `x + inner(x)` (or `shortcut(x) + inner(x)`), with `relu` ReLU'd in the same pass.
    fn forward_sum(&self, x: &RawTensor, relu: bool) -> Result<RawTensor> {
        let branch = self.inner.forward_raw(x)?;
        match &self.shortcut {
            None => add_branch(x, &branch, relu),
            Some(s) => add_shortcut(x, &s.forward_raw(x)?, &branch, relu),
        }
    }
}

impl Module for Residual {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.forward_sum(x, false)
    }
    /// The sum and the ReLU after it in one pass ([`RawTensor::add_relu`]): the values and
    /// gradients of `forward_raw` then `Relu` (ResNet's block), without the ReLU's passes.
    fn forward_relu_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.forward_sum(x, true)
    }
    /// `x + inner(x)` (or `shortcut(x) + inner(x)`) with the cache passed to the inner layers,
    /// then to the shortcut's.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        let branch = self.inner.forward_cached(x, cache)?;
        match &self.shortcut {
            None => add_branch(x, &branch, false),
            Some(s) => add_shortcut(x, &s.forward_cached(x, cache)?, &branch, false),
        }
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.inner.visit_params(prefix, visitor);
        if let Some(s) = &self.shortcut {
            s.visit_params(&join_name(prefix, "shortcut"), visitor);
        }
    }
    fn set_training(&mut self, training: bool) {
        self.inner.set_training(training);
        if let Some(s) = &mut self.shortcut {
            s.set_training(training);
        }
    }
    fn describe(&self) -> String {
        match &self.shortcut {
            None => format!("Residual({})", self.inner.describe()),
            Some(s) => format!("Residual({}, shortcut = {})", self.inner.describe(), s.describe()),
        }
    }
}

/// `a + b`, or with `relu` `max(a + b, 0)` in one pass.
fn sum(a: &RawTensor, b: &RawTensor, relu: bool) -> Result<RawTensor> {
    if relu {
        a.add_relu(b)
    } else {
        a.add(b)
    }
}

/// `x + branch` (ReLU'd with `relu`), with exact shapes: broadcasting here would silently hide
/// a wrong inner block.
fn add_branch(x: &RawTensor, branch: &RawTensor, relu: bool) -> Result<RawTensor> {
    if branch.shape() != x.shape() {
        return Err(Error::shape(
            "Residual",
            format!("input {:?}: inner layers produce {:?}, which cannot be added to it", x.shape(), branch.shape()),
        ));
    }
    sum(x, branch, relu)
}

/// `shortcut + branch` (ReLU'd with `relu`), with exact shapes (no broadcasting, as in
/// [`add_branch`]).
fn add_shortcut(x: &RawTensor, shortcut: &RawTensor, branch: &RawTensor, relu: bool) -> Result<RawTensor> {
    if branch.shape() != shortcut.shape() {
        return Err(Error::shape(
            "Residual",
            format!(
                "input {:?}: inner layers produce {:?} and the shortcut {:?}, which cannot be added",
                x.shape(),
                branch.shape(),
                shortcut.shape()
            ),
        ));
    }
    sum(shortcut, branch, relu)
}
