//! The result of a backward pass: one gradient per leaf tensor.

use std::collections::HashMap;

use crate::tensor::{RawTensor, TensorId};

/// Gradients of the leaves (parameters and inputs that require grad) of one backward pass.
#[derive(Default, Clone)]
pub struct Gradients {
    grads: HashMap<TensorId, RawTensor>,
}

impl Gradients {
    /// The gradient of `tensor`, if it took part in the computation.
    pub fn get(&self, tensor: &RawTensor) -> Option<&RawTensor> {
        self.grads.get(&tensor.id())
    }

    /// Removes and returns the gradient of `tensor`.
    pub fn remove(&mut self, tensor: &RawTensor) -> Option<RawTensor> {
        self.grads.remove(&tensor.id())
    }

    pub(crate) fn insert(&mut self, id: TensorId, grad: RawTensor) {
        self.grads.insert(id, grad);
    }

    /// Number of leaf tensors that received a gradient.
    pub fn len(&self) -> usize {
        self.grads.len()
    }

    /// True when no leaf received a gradient (nothing that required grad took part).
    pub fn is_empty(&self) -> bool {
        self.grads.is_empty()
    }
}
