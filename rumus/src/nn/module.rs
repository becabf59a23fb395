//! The `Module` trait: what every layer and every generated model implements.

use super::{KvCache, Param};
use crate::{RawTensor, Result};

/// A layer or a model: an untyped forward plus its parameters.
///
/// `#[model]` generates typed wrappers (`forward(&Tensor<In>) -> Result<Tensor<Out>>`) on top.
pub trait Module: Send + Sync {
    /// Runs the layer on a batch (`[batch, ...per-sample shape]`).
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor>;

    /// Runs the layer and a ReLU after it: `relu(forward_raw(x))`, which is the default. A layer
    /// that can apply the ReLU inside its own passes overrides it (the batch norms, through
    /// [`RawTensor::batch_norm_relu`], and [`Residual`](super::Residual), through
    /// [`RawTensor::add_relu`]: no separate ReLU pass forward or backward); a
    /// [`Sequential`](super::Sequential) built with `with_relu` / `push_with_relu` calls it,
    /// as does the code `#[model]` generates for a layer followed by `Relu`.
    fn forward_relu_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.forward_raw(x)?.relu()
    }

    /// Runs the layer on the new positions `x` (`[batch, new, ...]`) of a sequence whose earlier
    /// positions are in `cache` (incremental decoding). The default, [`forward_raw`], is right
    /// for layers that treat each position alone (linear, norms, activations); layers that mix
    /// or number positions (attention, positional embeddings) and containers override it.
    ///
    /// [`forward_raw`]: Module::forward_raw
    fn forward_cached(&self, x: &RawTensor, _cache: &mut KvCache) -> Result<RawTensor> {
        self.forward_raw(x)
    }

    /// Visits parameters and buffers with PyTorch-style names relative to this module
    /// (`weight`, `bias`, `running_mean`, nested ones as `0.weight`, `features.3.bias` ...).
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param));

    /// Switches training behaviour (dropout, batch-norm statistics). Default: nothing to switch.
    /// A layer that has such behaviour runs it only when
    /// [`training_active`](super::training_active)`(flag)` says so, so that `evaluate` and
    /// `predict` (under an [`EvalGuard`](super::EvalGuard)) need no `&mut` model.
    fn set_training(&mut self, _training: bool) {}

    /// The layer's name and arguments as shown by `summary()`, e.g. `Conv2d(1 => 6, kernel = 5)`.
    fn describe(&self) -> String;
}

/// Visits a layer's `weight` and, if it has one, its `bias` under PyTorch's names.
pub(crate) fn visit_weight_and_bias(
    prefix: &str,
    weight: &Param,
    bias: Option<&Param>,
    visitor: &mut dyn FnMut(&str, &Param),
) {
    visitor(&join_name(prefix, "weight"), weight);
    if let Some(b) = bias {
        visitor(&join_name(prefix, "bias"), b);
    }
}

/// Joins a prefix and a name with a dot, PyTorch style.
pub fn join_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Every named parameter and buffer of `module`, in visiting order: PyTorch's `state_dict`
/// (what checkpoints hold). A tied tensor appears under each of its names.
pub fn named_params(module: &dyn Module) -> Vec<(String, Param)> {
    let mut out = Vec::new();
    module.visit_params("", &mut |name, p| out.push((name.to_string(), p.clone())));
    out
}

/// The trainable parameters of `module` (PyTorch's `named_parameters`): each tensor once, under
/// its first name, so a tied weight is stepped, decayed and clipped once. No buffers.
pub fn named_parameters(module: &dyn Module) -> Vec<(String, Param)> {
    unique(named_params(module).into_iter().filter(|(_, p)| p.is_trainable()))
}

/// The buffers of `module` (batch-norm running statistics; PyTorch's `named_buffers`): each
/// tensor once, under its first name. No optimizer, weight decay or clipping touches them.
pub fn named_buffers(module: &dyn Module) -> Vec<(String, Param)> {
    unique(named_params(module).into_iter().filter(|(_, p)| !p.is_trainable()))
}

/// Keeps the first of every group of entries whose tensors share storage.
fn unique(entries: impl Iterator<Item = (String, Param)>) -> Vec<(String, Param)> {
    let mut out: Vec<(String, Param)> = Vec::new();
    for (name, param) in entries {
        if !out.iter().any(|(_, seen)| seen.same_tensor(&param)) {
            out.push((name, param));
        }
    }
    out
}

/// Number of trainable scalars of `module` (a tied weight counts once).
pub fn count_trainable(module: &dyn Module) -> usize {
    named_parameters(module).iter().map(|(_, p)| p.tensor().numel()).sum()
}
