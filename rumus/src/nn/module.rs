//! The `Module` trait: what every layer and every generated model implements.

use super::Param;
use crate::{RawTensor, Result};

/// A layer or a model: an untyped forward plus its parameters.
///
/// `#[model]` generates typed wrappers (`forward(&Tensor<In>) -> Result<Tensor<Out>>`) on top.
pub trait Module: Send + Sync {
    /// Runs the layer on a batch (`[batch, ...per-sample shape]`).
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor>;

    /// Visits parameters and buffers with PyTorch-style names relative to this module
    /// (`weight`, `bias`, `running_mean`, nested ones as `0.weight`, `features.3.bias` ...).
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param));

    /// Switches training behaviour (dropout, batch-norm statistics). Default: nothing to switch.
    fn set_training(&mut self, _training: bool) {}

    /// The layer's name and arguments as shown by `summary()`, e.g. `Conv2d(1 => 6, kernel = 5)`.
    fn describe(&self) -> String;
}

/// Joins a prefix and a name with a dot, PyTorch style.
pub fn join_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// All named parameters and buffers of `module`, in visiting order.
pub fn named_params(module: &dyn Module) -> Vec<(String, Param)> {
    let mut out = Vec::new();
    module.visit_params("", &mut |name, p| out.push((name.to_string(), p.clone())));
    out
}

/// Number of trainable scalars of `module`.
pub fn count_trainable(module: &dyn Module) -> usize {
    named_params(module).iter().filter(|(_, p)| p.is_trainable()).map(|(_, p)| p.tensor().numel()).sum()
}
