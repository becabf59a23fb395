//! Reverse-mode autograd. Every op that produces a tensor from inputs that require grad attaches
//! a [`GradNode`]: the backward rule plus the inputs it needs. `backward()` walks the graph from
//! a scalar in reverse topological order and returns the gradients of all leaves.
//!
//! Backward rules are written with tensor ops, so they run on whatever device the tensors are on;
//! they run under `no_grad`, so no graph is recorded for them.

mod gradients;
mod no_grad;

pub use gradients::Gradients;
pub use no_grad::{is_grad_enabled, no_grad, NoGradGuard};

use std::collections::{HashMap, HashSet};

use crate::tensor::{RawTensor, TensorId};
use crate::{Error, Result};

/// The backward rule of one op: the gradient of each input given the gradient of the output.
/// Saved values (inputs, outputs, indices) live in the implementing struct.
pub trait BackwardOp: Send + Sync {
    fn name(&self) -> &'static str;
    /// One entry per input of the node; `None` for inputs that get no gradient.
    fn backward(&self, inputs: &[RawTensor], grad_out: &RawTensor) -> Result<Vec<Option<RawTensor>>>;
}

/// How a tensor was computed.
pub struct GradNode {
    pub(crate) op: Box<dyn BackwardOp>,
    pub(crate) inputs: Vec<RawTensor>,
}

/// Tensors reachable from `root` through grad nodes, inputs before the tensors computed from them.
fn topological_order(root: &RawTensor) -> Vec<RawTensor> {
    let mut order = Vec::new();
    let mut visited = HashSet::new();
    // Iterative DFS: deep graphs (long RNN unrolls) must not overflow the stack.
    let mut stack = vec![(root.clone(), false)];
    while let Some((tensor, expanded)) = stack.pop() {
        if expanded {
            order.push(tensor);
            continue;
        }
        if !visited.insert(tensor.id()) {
            continue;
        }
        stack.push((tensor.clone(), true));
        if let Some(node) = tensor.grad_node() {
            for input in &node.inputs {
                if input.requires_grad() && !visited.contains(&input.id()) {
                    stack.push((input.clone(), false));
                }
            }
        }
    }
    order
}

/// Backpropagates from `root` (which must hold a single element).
pub(crate) fn backward(root: &RawTensor) -> Result<Gradients> {
    if root.numel() != 1 {
        return Err(Error::Autograd(format!(
            "can only start from a scalar, got a tensor of shape {:?}; reduce it first (e.g. .mean())",
            root.shape()
        )));
    }
    if !root.requires_grad() {
        return Err(Error::Autograd(
            "the tensor does not require grad: no parameter or input with requires_grad reached it".into(),
        ));
    }
    let _guard = NoGradGuard::new();
    let order = topological_order(root);
    let mut pending: HashMap<TensorId, RawTensor> = HashMap::new();
    pending.insert(root.id(), root.ones_like()?);
    let mut leaves = Gradients::default();
    for tensor in order.iter().rev() {
        let Some(grad) = pending.remove(&tensor.id()) else { continue };
        let Some(node) = tensor.grad_node() else {
            leaves.insert(tensor, grad);
            continue;
        };
        let input_grads = node.op.backward(&node.inputs, &grad)?;
        for (input, input_grad) in node.inputs.iter().zip(input_grads) {
            let Some(input_grad) = input_grad else { continue };
            if !input.requires_grad() {
                continue;
            }
            if input_grad.shape() != input.shape() {
                return Err(Error::Autograd(format!(
                    "{} backward produced a gradient of shape {:?} for an input of shape {:?}",
                    node.op.name(),
                    input_grad.shape(),
                    input.shape()
                )));
            }
            // A tensor used twice receives the sum of both gradients.
            let total = match pending.remove(&input.id()) {
                Some(previous) => previous.add(&input_grad)?,
                None => input_grad,
            };
            pending.insert(input.id(), total);
        }
    }
    Ok(leaves)
}
