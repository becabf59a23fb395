//! The untyped tensor: shared storage plus a layout, a device and its place in the graph.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::autograd::{self, BackwardOp, GradNode, Gradients};
use crate::backend::{DType, Storage};
use crate::{Device, Error, Layout, Result};

/// Unique identity of a tensor (views get their own id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl TensorId {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        TensorId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

struct TensorData {
    id: TensorId,
    storage: Storage,
    layout: Layout,
    device: Device,
    requires_grad: bool,
    grad_node: Option<Arc<GradNode>>,
}

impl Drop for TensorData {
    /// Releases the graph behind this tensor without recursion: dropping the last handle of a
    /// 300,000-op chain would otherwise recurse once per node and overflow the stack.
    fn drop(&mut self) {
        if let Some(node) = self.grad_node.take() {
            autograd::release_graph(node);
        }
    }
}

/// A tensor of any rank whose shape is known only at run time: the escape hatch under the typed
/// [`Tensor`](crate::Tensor). Cloning is cheap and shares data.
#[derive(Clone)]
pub struct RawTensor(Arc<TensorData>);

impl RawTensor {
    /// Wraps a fresh storage (leaf, no grad).
    pub(crate) fn from_storage(storage: Storage, layout: Layout, device: Device) -> Self {
        RawTensor(Arc::new(TensorData {
            id: TensorId::next(),
            storage,
            layout,
            device,
            requires_grad: false,
            grad_node: None,
        }))
    }

    /// A contiguous tensor of `shape` over a fresh kernel output, with no graph.
    pub(crate) fn from_kernel(storage: Storage, shape: &[usize], device: &Device) -> Self {
        Self::from_storage(storage, Layout::contiguous(shape), device.clone())
    }

    /// Result of an op: records `backward` in the graph when grad is enabled and an input needs it.
    pub(crate) fn from_op(
        storage: Storage,
        layout: Layout,
        device: Device,
        inputs: &[&RawTensor],
        backward: impl FnOnce() -> Box<dyn BackwardOp>,
    ) -> Self {
        let tracked = autograd::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
        let grad_node = tracked.then(|| GradNode::new(backward(), inputs.iter().map(|t| (*t).clone()).collect()));
        RawTensor(Arc::new(TensorData {
            id: TensorId::next(),
            storage,
            layout,
            device,
            requires_grad: tracked,
            grad_node,
        }))
    }

    /// A contiguous result of an op on `device` with `shape`.
    pub(crate) fn from_op_contiguous(
        storage: Storage,
        shape: &[usize],
        device: &Device,
        inputs: &[&RawTensor],
        backward: impl FnOnce() -> Box<dyn BackwardOp>,
    ) -> Self {
        Self::from_op(storage, Layout::contiguous(shape), device.clone(), inputs, backward)
    }

    /// The identity of the tensor node: views and clones of one handle share it; gradients are keyed by it.
    pub fn id(&self) -> TensorId {
        self.0.id
    }

    /// Size of each axis, outermost first.
    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }

    /// Size of `axis` (negative counts from the end).
    pub fn dim(&self, axis: isize) -> Result<usize> {
        let axis = crate::layout::resolve_axis("dim", axis, self.rank())?;
        Ok(self.shape()[axis])
    }

    /// Number of axes (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.0.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// Shape, strides (in elements) and offset into the storage.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Element type: f32 for values, u32 for class targets and indices.
    pub fn dtype(&self) -> DType {
        self.0.storage.dtype()
    }

    /// The device whose memory holds the elements.
    pub fn device(&self) -> &Device {
        &self.0.device
    }

    /// The device memory behind this tensor (shared with its views; see [`RawTensor::layout`]).
    /// For custom kernels called through [`Device::backend`].
    pub fn storage(&self) -> &Storage {
        &self.0.storage
    }

    /// True when `backward` computes a gradient for this tensor (a parameter, or a result of one).
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad
    }

    pub(crate) fn grad_node(&self) -> Option<&Arc<GradNode>> {
        self.0.grad_node.as_ref()
    }

    /// This handle's node when it was the last handle of its tensor (whose data it then frees);
    /// `None` when other handles keep the tensor alive or it has no node.
    pub(crate) fn into_last_grad_node(self) -> Option<Arc<GradNode>> {
        Arc::try_unwrap(self.0).ok().and_then(|mut data| data.grad_node.take())
    }

    /// A leaf that shares this tensor's data and requires grad (a parameter or an input whose
    /// gradient you want).
    pub fn requires_grad_(&self) -> Result<RawTensor> {
        if self.dtype() != DType::F32 {
            return Err(Error::DType { op: "requires_grad", expected: "f32", got: self.dtype().name() });
        }
        Ok(RawTensor(Arc::new(TensorData {
            id: TensorId::next(),
            storage: self.0.storage.clone(),
            layout: self.0.layout.clone(),
            device: self.0.device.clone(),
            requires_grad: true,
            grad_node: None,
        })))
    }

    /// The same data, cut from the graph.
    pub fn detach(&self) -> RawTensor {
        if !self.requires_grad() {
            return self.clone();
        }
        Self::from_storage(self.0.storage.clone(), self.0.layout.clone(), self.0.device.clone())
    }

    /// The same data viewed through another layout (a metadata-only view), keeping the graph.
    pub(crate) fn with_layout(&self, layout: Layout, backward: impl FnOnce() -> Box<dyn BackwardOp>) -> RawTensor {
        Self::from_op(self.0.storage.clone(), layout, self.0.device.clone(), &[self], backward)
    }

    /// True when the elements are row-major from the start of the storage.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous() && self.0.layout.offset() == 0
    }

    /// Backpropagates from this scalar; returns the gradient of every leaf that requires grad.
    /// The pass frees the graph's saved tensors as it goes, so a second call on the same graph
    /// is an error.
    ///
    /// ```
    /// use rumus::{Device, Error, RawTensor};
    ///
    /// let x = RawTensor::from_vec(vec![1.0, -2.0, 3.0], &[3], &Device::cpu())?.requires_grad_()?;
    /// let y = x.mul(&x)?.sum(&[0], false)?; // y = Σ x²
    /// let grads = y.backward()?;
    /// assert_eq!(grads.get(&x).expect("x requires grad").to_vec()?, [2.0, -4.0, 6.0]); // 2x
    /// // The pass freed the graph's saved tensors: a second one is an error, not a panic.
    /// assert!(matches!(y.backward(), Err(Error::Autograd(_))));
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn backward(&self) -> Result<Gradients> {
        autograd::backward(self)
    }

    pub(crate) fn check_same_device(&self, op: &'static str, other: &RawTensor) -> Result<()> {
        if self.device().same(other.device()) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch { op, lhs: self.device().name(), rhs: other.device().name() })
        }
    }

    pub(crate) fn check_f32(&self, op: &'static str) -> Result<()> {
        match self.dtype() {
            DType::F32 => Ok(()),
            other => Err(Error::DType { op, expected: "f32", got: other.name() }),
        }
    }
}

impl fmt::Debug for RawTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawTensor({:?}, {}, {}", self.shape(), self.dtype().name(), self.device().name())?;
        if self.requires_grad() {
            f.write_str(", requires_grad")?;
        }
        f.write_str(")")
    }
}
