//! Reverse-mode autograd. Every op that produces a tensor from inputs that require grad attaches
//! a [`GradNode`]: the backward rule plus the inputs it needs. `backward()` walks the graph from
//! a scalar in reverse topological order and returns the gradients of all leaves.
//!
//! Like PyTorch, a backward pass frees each node's saved tensors as soon as the node has run, so
//! activations are released while the pass goes; backwarding through the same graph again is an
//! error.
//!
//! Backward rules are written with tensor ops, so they run on whatever device the tensors are on;
//! they run under `no_grad`, so no graph is recorded for them.

mod gradients;
mod no_grad;

pub use gradients::Gradients;
pub use no_grad::{is_grad_enabled, no_grad, NoGradGuard};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::tensor::{RawTensor, TensorId};
use crate::{Error, Result};

/// The backward rule of one op: the gradient of each input given the gradient of the output.
/// Saved values (inputs, outputs, indices) live in the implementing struct.
pub trait BackwardOp: Send + Sync {
    /// The op's name, as error messages and graph dumps show it (e.g. `"matmul"`).
    fn name(&self) -> &'static str;
    /// One entry per input of the node; `None` for inputs that get no gradient.
    fn backward(&self, inputs: &[RawTensor], grad_out: &RawTensor) -> Result<Vec<Option<RawTensor>>>;
}

/// What a node keeps for its backward pass; the pass takes it, which frees the saved tensors.
pub(crate) struct Saved {
    pub(crate) op: Box<dyn BackwardOp>,
    pub(crate) inputs: Vec<RawTensor>,
}

/// How a tensor was computed. Shared (`Arc`) so that a backward pass can hold the node without
/// holding the tensor, whose storage is then freed once no later node needs it.
pub struct GradNode {
    name: &'static str,
    saved: Mutex<Option<Saved>>,
}

impl GradNode {
    pub(crate) fn new(op: Box<dyn BackwardOp>, inputs: Vec<RawTensor>) -> Arc<Self> {
        Arc::new(GradNode { name: op.name(), saved: Mutex::new(Some(Saved { op, inputs })) })
    }

    fn lock(&self) -> MutexGuard<'_, Option<Saved>> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The error for a node whose saved tensors an earlier backward pass already freed.
    fn freed(&self) -> Error {
        Error::Autograd(format!(
            "trying to backward through the graph a second time: the saved tensors of {} were freed by \
             the first backward pass; run the forward pass again to build a new graph",
            self.name
        ))
    }
}

/// Drops `node` and every node only it keeps alive, with an explicit work list instead of the
/// recursion of nested drops (node → saved inputs → their nodes → ...), so a graph of any depth
/// is released in constant stack. Nodes still shared elsewhere are left to their other owners.
pub(crate) fn release_graph(node: Arc<GradNode>) {
    let mut pending = vec![node];
    while let Some(node) = pending.pop() {
        let Ok(mut node) = Arc::try_unwrap(node) else { continue };
        let saved = node.saved.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        let Some(Saved { op, inputs }) = saved else { continue };
        // The op's own copies of inputs go first, so the handles below are the last ones.
        drop(op);
        pending.extend(inputs.into_iter().filter_map(RawTensor::into_last_grad_node));
    }
}

/// One tensor of the graph as the backward pass sees it: its identity and, unless it is a leaf,
/// its node. Holding this instead of the tensor lets the tensor's storage go early.
struct Entry {
    id: TensorId,
    node: Option<Arc<GradNode>>,
}

/// Tensors reachable from `root` through grad nodes, inputs before the tensors computed from them.
fn topological_order(root: &RawTensor) -> Result<Vec<Entry>> {
    let mut order = Vec::new();
    let mut visited = HashSet::new();
    // Iterative DFS: deep graphs (long RNN unrolls) must not overflow the stack.
    let mut stack = vec![(root.clone(), false)];
    while let Some((tensor, expanded)) = stack.pop() {
        if expanded {
            order.push(Entry { id: tensor.id(), node: tensor.grad_node().cloned() });
            continue;
        }
        if !visited.insert(tensor.id()) {
            continue;
        }
        stack.push((tensor.clone(), true));
        if let Some(node) = tensor.grad_node() {
            let saved = node.lock();
            let saved = saved.as_ref().ok_or_else(|| node.freed())?;
            for input in &saved.inputs {
                if input.requires_grad() && !visited.contains(&input.id()) {
                    stack.push((input.clone(), false));
                }
            }
        }
    }
    Ok(order)
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
    let mut order = topological_order(root)?;
    let mut pending: HashMap<TensorId, RawTensor> = HashMap::new();
    pending.insert(root.id(), root.ones_like()?);
    let mut leaves = Gradients::default();
    // Popping drops each entry once it has run, so nothing here outlives its use.
    while let Some(Entry { id, node }) = order.pop() {
        // Removing the gradient frees an intermediate one as soon as it has been propagated.
        let Some(grad) = pending.remove(&id) else { continue };
        let Some(node) = node else {
            // A leaf's gradient may be a view (a sum's broadcast gradient): what callers and
            // optimizers get is contiguous, as before; an already contiguous one is not copied.
            leaves.insert(id, grad.contiguous()?);
            continue;
        };
        // Taking the saved state frees the node's saved tensors at the end of this iteration.
        let Saved { op, inputs } = node.lock().take().ok_or_else(|| node.freed())?;
        let input_grads = op.backward(&inputs, &grad)?;
        for (input, input_grad) in inputs.iter().zip(input_grads) {
            let Some(input_grad) = input_grad else { continue };
            if !input.requires_grad() {
                continue;
            }
            if input_grad.shape() != input.shape() {
                return Err(Error::Autograd(format!(
                    "{} backward produced a gradient of shape {:?} for an input of shape {:?}",
                    op.name(),
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
