//! Metadata-only views: reshape, permute/transpose, slice, squeeze/unsqueeze, broadcast.
//! Each shares storage with its input; its backward maps the gradient back to the input's shape.

use crate::autograd::BackwardOp;
use crate::layout::{checked_numel, resolve_axis};
use crate::tensor::RawTensor;
use crate::{Error, Layout, Result};

/// Gradient passes through unchanged (contiguous copies).
pub(crate) struct Identity;

impl BackwardOp for Identity {
    fn name(&self) -> &'static str {
        "contiguous"
    }
    fn backward(&self, _: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        Ok(vec![Some(grad.clone())])
    }
}

struct ReshapeBackward;

impl BackwardOp for ReshapeBackward {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        Ok(vec![Some(grad.reshape(inputs[0].shape())?)])
    }
}

struct PermuteBackward {
    axes: Vec<usize>,
}

impl BackwardOp for PermuteBackward {
    fn name(&self) -> &'static str {
        "permute"
    }
    fn backward(&self, _: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let mut inverse = vec![0; self.axes.len()];
        for (i, &a) in self.axes.iter().enumerate() {
            inverse[a] = i;
        }
        Ok(vec![Some(grad.permute(&inverse)?)])
    }
}

struct NarrowBackward {
    axis: usize,
    start: usize,
}

impl BackwardOp for NarrowBackward {
    fn name(&self) -> &'static str {
        "slice"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let input = &inputs[0];
        let full = RawTensor::zeros(input.shape(), input.device())?;
        let len = grad.shape()[self.axis];
        let window = full.layout().narrow(self.axis, self.start, self.start + len)?;
        let grad = grad.contiguous()?;
        let backend = input.device().backend();
        backend.copy_strided(grad.storage(), grad.layout(), full.storage(), &window)?;
        Ok(vec![Some(full)])
    }
}

struct BroadcastBackward;

impl BackwardOp for BroadcastBackward {
    fn name(&self) -> &'static str {
        "broadcast_to"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        Ok(vec![Some(grad.sum_to_shape(inputs[0].shape())?)])
    }
}

impl RawTensor {
    /// Same elements with a new shape (see [`RawTensor::reshape_infer`] for a `-1` axis).
    /// Copies only when the layout is not contiguous.
    pub fn reshape(&self, shape: &[usize]) -> Result<RawTensor> {
        let numel = checked_numel("reshape", shape)?;
        if numel != self.numel() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "cannot reshape {:?} ({} elements) into {shape:?} ({numel} elements)",
                    self.shape(),
                    self.numel(),
                ),
            ));
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        // One element repeated (a scalar broadcast: a sum's gradient) stays a view in any shape.
        if self.numel() > 1 && self.layout().strides().iter().all(|&s| s == 0) {
            let layout = Layout::new(shape.to_vec(), vec![0; shape.len()], self.layout().offset())?;
            return Ok(self.with_layout(layout, || Box::new(ReshapeBackward)));
        }
        let source = if self.layout().is_contiguous() { self.clone() } else { self.contiguous()? };
        let layout = Layout::new(shape.to_vec(), crate::layout::contiguous_strides(shape), source.layout().offset())?;
        Ok(source.with_layout(layout, || Box::new(ReshapeBackward)))
    }

    /// Reshape with at most one `-1` entry, inferred from the element count. Any other negative
    /// size, or a second `-1`, is an error.
    pub fn reshape_infer(&self, shape: &[isize]) -> Result<RawTensor> {
        if let Some(&bad) = shape.iter().find(|&&d| d < -1) {
            return Err(Error::invalid("reshape", format!("size {bad} in {shape:?}: only -1 may be inferred")));
        }
        let unknown = shape.iter().filter(|&&d| d == -1).count();
        if unknown > 1 {
            return Err(Error::invalid("reshape", format!("{shape:?}: only one size may be -1")));
        }
        let known: Vec<usize> = shape.iter().filter(|&&d| d >= 0).map(|&d| d as usize).collect();
        let known_count = checked_numel("reshape", &known)?;
        let bad = || Error::shape("reshape", format!("cannot reshape {:?} into {:?}", self.shape(), shape));
        let inferred = match unknown {
            0 => 0,
            _ if known_count > 0 && self.numel().is_multiple_of(known_count) => self.numel() / known_count,
            _ => return Err(bad()),
        };
        let resolved: Vec<usize> = shape.iter().map(|&d| if d == -1 { inferred } else { d as usize }).collect();
        self.reshape(&resolved)
    }

    /// Reorders axes (a view).
    pub fn permute(&self, axes: &[usize]) -> Result<RawTensor> {
        let layout = self.layout().permute(axes)?;
        let axes = axes.to_vec();
        Ok(self.with_layout(layout, move || Box::new(PermuteBackward { axes })))
    }

    /// Swaps two axes (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<RawTensor> {
        let (a, b) = (resolve_axis("transpose", a, self.rank())?, resolve_axis("transpose", b, self.rank())?);
        let mut axes: Vec<usize> = (0..self.rank()).collect();
        axes.swap(a, b);
        self.permute(&axes)
    }

    /// Elements `start..end` along `axis` (a view).
    pub fn narrow(&self, axis: isize, start: usize, end: usize) -> Result<RawTensor> {
        let axis = resolve_axis("slice", axis, self.rank())?;
        let layout = self.layout().narrow(axis, start, end)?;
        Ok(self.with_layout(layout, move || Box::new(NarrowBackward { axis, start })))
    }

    /// Collapses axes `start..` into one: `[n, c, h, w].flatten_from(1)` is `[n, c*h*w]`.
    pub fn flatten_from(&self, start: usize) -> Result<RawTensor> {
        if start >= self.rank() {
            return Err(Error::invalid("flatten", format!("start axis {start} for shape {:?}", self.shape())));
        }
        let mut shape = self.shape()[..start].to_vec();
        shape.push(self.shape()[start..].iter().product());
        self.reshape(&shape)
    }

    /// Inserts a size-1 axis at `axis`.
    pub fn unsqueeze(&self, axis: usize) -> Result<RawTensor> {
        if axis > self.rank() {
            return Err(Error::invalid("unsqueeze", format!("axis {axis} for shape {:?}", self.shape())));
        }
        let mut shape = self.shape().to_vec();
        shape.insert(axis, 1);
        self.reshape(&shape)
    }

    /// Removes a size-1 axis.
    pub fn squeeze(&self, axis: isize) -> Result<RawTensor> {
        let axis = resolve_axis("squeeze", axis, self.rank())?;
        if self.shape()[axis] != 1 {
            return Err(Error::invalid("squeeze", format!("axis {axis} of {:?} is not of size 1", self.shape())));
        }
        let mut shape = self.shape().to_vec();
        shape.remove(axis);
        self.reshape(&shape)
    }

    /// A view of `shape` repeating size-1 axes (NumPy rules).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<RawTensor> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let layout = self.layout().broadcast_to(shape)?;
        Ok(self.with_layout(layout, || Box::new(BroadcastBackward)))
    }
}
