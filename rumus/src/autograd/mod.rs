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

/// Tensors reachable from `root` through grad nodes, inputs before the tensors computed from them,
/// and how many uses by grad nodes each tensor has (an input used twice by one node counts twice).
fn topological_order(root: &RawTensor) -> Result<(Vec<Entry>, HashMap<TensorId, usize>)> {
    let mut order = Vec::new();
    let mut visited = HashSet::new();
    let mut uses: HashMap<TensorId, usize> = HashMap::new();
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
                if input.requires_grad() {
                    *uses.entry(input.id()).or_default() += 1;
                    if !visited.contains(&input.id()) {
                        stack.push((input.clone(), false));
                    }
                }
            }
        }
    }
    Ok((order, uses))
}

/// Backpropagates from `root` (which must hold a single element).
pub(crate) fn backward(root: &RawTensor) -> Result<Gradients> {
    backward_with(root, &mut |_, _| Ok(()))
}

/// [`backward`], calling `on_leaf_ready(id, gradient)` for each leaf as soon as its gradient is
/// final (every node that uses the leaf has run), while the pass goes on through the rest of the
/// graph. Each leaf that receives a gradient is reported exactly once, in the order the pass
/// completes them (the same order on every run of the same graph). An error from the callback
/// ends the pass with that error. Data-parallel training uses it to start reducing a bucket of
/// gradients while backward computes the others.
pub(crate) fn backward_with(
    root: &RawTensor,
    on_leaf_ready: &mut dyn FnMut(TensorId, &RawTensor) -> Result<()>,
) -> Result<Gradients> {
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
    let (mut order, mut uses) = topological_order(root)?;
    let mut pending: HashMap<TensorId, RawTensor> = HashMap::new();
    pending.insert(root.id(), root.ones_like()?);
    let mut leaves = Gradients::default();
    // Popping drops each entry once it has run, so nothing here outlives its use.
    while let Some(Entry { id, node }) = order.pop() {
        // Removing the gradient frees an intermediate one as soon as it has been propagated.
        let Some(grad) = pending.remove(&id) else { continue };
        let Some(node) = node else {
            // A leaf no node uses (the root itself); the others were completed below. A leaf's
            // gradient may be a view (a sum's broadcast gradient): what callers, optimizers and
            // `on_leaf_ready` get is contiguous; an already contiguous one is not copied.
            let grad = grad.contiguous()?;
            on_leaf_ready(id, &grad)?;
            leaves.insert(id, grad);
            continue;
        };
        // Taking the saved state frees the node's saved tensors at the end of this iteration.
        let Saved { op, inputs } = node.lock().take().ok_or_else(|| node.freed())?;
        let input_grads = op.backward(&inputs, &grad)?;
        for (input, input_grad) in inputs.iter().zip(input_grads) {
            if !input.requires_grad() {
                continue;
            }
            if let Some(input_grad) = input_grad {
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
            // The last use of a leaf done: its gradient is final.
            let left = uses.get_mut(&input.id()).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) && input.grad_node().is_none() {
                if let Some(grad) = pending.remove(&input.id()) {
                    let grad = grad.contiguous()?;
                    on_leaf_ready(input.id(), &grad)?;
                    leaves.insert(input.id(), grad);
                }
            }
        }
    }
    Ok(leaves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn each_leaf_is_reported_once_as_soon_as_its_gradient_is_final() -> Result<()> {
        let cpu = Device::cpu();
        let leaf = |values: Vec<f32>, shape: &[usize]| RawTensor::from_vec(values, shape, &cpu)?.requires_grad_();
        let x = leaf(vec![0.5, -1.0, 2.0, 1.5, 0.25, -0.75], &[2, 3])?;
        let w1 = leaf((0..12).map(|i| i as f32 * 0.1 - 0.5).collect(), &[3, 4])?;
        let w2 = leaf((0..8).map(|i| 0.3 - i as f32 * 0.07).collect(), &[4, 2])?;
        // w1 is used twice, so its gradient is final only after both uses.
        let h = x.matmul(&w1)?.relu()?;
        let loss = h.matmul(&w2)?.sum_all()?.add(&w1.mul(&w1)?.sum_all()?)?;
        let mut reported: Vec<(TensorId, Vec<f32>)> = Vec::new();
        let grads = backward_with(&loss, &mut |id, g| {
            reported.push((id, g.to_vec()?));
            Ok(())
        })?;
        let ids: Vec<TensorId> = reported.iter().map(|(id, _)| *id).collect();
        // The last layer's weight is final before the first layer's (and x's) are computed.
        let at = |t: &RawTensor| ids.iter().position(|&id| id == t.id()).expect("reported");
        assert_eq!(ids.len(), 3, "each leaf once");
        assert!(at(&w2) < at(&w1) && at(&w2) < at(&x), "{ids:?}");
        // What was reported is the final gradient.
        for (id, values) in &reported {
            let t = [&x, &w1, &w2].into_iter().find(|t| t.id() == *id).expect("a leaf");
            assert_eq!(&grads.get(t).expect("a gradient").to_vec()?, values);
        }
        Ok(())
    }

    #[test]
    fn an_error_from_the_callback_ends_the_pass() -> Result<()> {
        let x = RawTensor::from_vec(vec![1.0, 2.0], &[2], &Device::cpu())?.requires_grad_()?;
        let loss = x.mul(&x)?.sum_all()?;
        let result = backward_with(&loss, &mut |_, _| Err(Error::Training("stop".into())));
        assert!(matches!(result, Err(Error::Training(m)) if m == "stop"));
        Ok(())
    }
}
