//! Reductions over axes: sum, mean, max, min (with keepdim), argmax, and `sum_to_shape`, the
//! adjoint of broadcasting.

use crate::autograd::BackwardOp;
use crate::backend::{ReduceDims, ReduceOp};
use crate::layout::{resolve_axes, resolve_axis};
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// `[outer, len, inner]` around `axis` of `shape`.
fn dims_around(shape: &[usize], axis: usize) -> ReduceDims {
    ReduceDims { outer: shape[..axis].iter().product(), len: shape[axis], inner: shape[axis + 1..].iter().product() }
}

struct SumBackward;

impl BackwardOp for SumBackward {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        // grad has the keepdim shape: repeat it along the reduced axis, as a broadcast view
        // (the op that takes it reads it strided; materialising it cost a full write and read).
        Ok(vec![Some(grad.broadcast_to(inputs[0].shape())?)])
    }
}

/// Max/min send the gradient to the extreme elements, split evenly between ties.
struct ExtremumBackward {
    output: RawTensor,
    axis: usize,
}

impl BackwardOp for ExtremumBackward {
    fn name(&self) -> &'static str {
        "max/min"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let x = &inputs[0];
        let hits = x.binary(crate::backend::BinaryOp::Eq, &self.output)?;
        let count = hits.reduce_axis(ReduceOp::Sum, self.axis)?;
        Ok(vec![Some(hits.mul(&grad.div(&count)?)?)])
    }
}

impl RawTensor {
    /// Reduces one axis, keeping it with size 1.
    fn reduce_axis(&self, op: ReduceOp, axis: usize) -> Result<RawTensor> {
        self.check_f32("reduce")?;
        let name = match op {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        };
        if op != ReduceOp::Sum && self.shape()[axis] == 0 {
            return Err(Error::shape(
                name,
                format!("cannot take the {name} of an empty axis {axis} of {:?}", self.shape()),
            ));
        }
        let x = self.contiguous()?;
        let storage = x.device().backend().reduce(op, x.storage(), dims_around(x.shape(), axis))?;
        let mut shape = x.shape().to_vec();
        shape[axis] = 1;
        let output = RawTensor::from_kernel(storage.clone(), &shape, x.device());
        Ok(RawTensor::from_op_contiguous(storage, &shape, x.device(), &[&x], || match op {
            ReduceOp::Sum => Box::new(SumBackward) as Box<dyn BackwardOp>,
            _ => Box::new(ExtremumBackward { output, axis }),
        }))
    }

    fn reduce_axes(&self, op: ReduceOp, axes: &[isize], keepdim: bool) -> Result<RawTensor> {
        let mut resolved = resolve_axes("reduce", axes, self.rank())?;
        resolved.sort_unstable();
        let mut out = self.clone();
        for &axis in &resolved {
            out = out.reduce_axis(op, axis)?;
        }
        if keepdim {
            return Ok(out);
        }
        let shape: Vec<usize> =
            self.shape().iter().enumerate().filter(|(i, _)| !resolved.contains(i)).map(|(_, &d)| d).collect();
        out.reshape(&shape)
    }

    /// Sum over `axes` (negative axes count from the end).
    ///
    /// ```
    /// use rumus::{Device, RawTensor};
    ///
    /// let t = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::cpu())?;
    /// assert_eq!(t.sum(&[1], false)?.to_vec()?, [6.0, 15.0]);
    /// assert_eq!(t.sum(&[-2], true)?.shape(), [1, 3]);
    /// assert_eq!(t.sum(&[0, 1], false)?.item()?, 21.0);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<RawTensor> {
        self.reduce_axes(ReduceOp::Sum, axes, keepdim)
    }

    /// Mean over `axes` (negative axes count from the last); `keepdim` keeps them as size 1. An axis
    /// out of range or named twice, or a mean over an empty axis, is [`Error::Shape`] or
    /// [`Error::InvalidArgument`].
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<RawTensor> {
        // Each axis once (a repeated axis is an error), so the count is the reduced elements'.
        let count: usize = resolve_axes("mean", axes, self.rank())?.iter().map(|&a| self.shape()[a]).product();
        if count == 0 {
            return Err(Error::shape("mean", format!("mean over an empty axis of {:?}", self.shape())));
        }
        self.sum(axes, keepdim)?.mul_scalar(1.0 / count as f32)
    }

    /// Largest value over `axes` (axes as [`RawTensor::mean`]); the gradient goes to the maximal
    /// elements, split evenly between ties.
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<RawTensor> {
        self.reduce_axes(ReduceOp::Max, axes, keepdim)
    }

    /// Smallest value over `axes` (axes as [`RawTensor::mean`]); the gradient goes to the minimal
    /// elements, split evenly between ties.
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<RawTensor> {
        self.reduce_axes(ReduceOp::Min, axes, keepdim)
    }

    /// Sum of all elements, as a rank-0 tensor.
    pub fn sum_all(&self) -> Result<RawTensor> {
        self.reshape(&[self.numel()])?.sum(&[0], false)
    }

    /// Mean of all elements, as a rank-0 tensor.
    pub fn mean_all(&self) -> Result<RawTensor> {
        if self.numel() == 0 {
            return Err(Error::shape("mean", "mean of an empty tensor"));
        }
        self.sum_all()?.mul_scalar(1.0 / self.numel() as f32)
    }

    /// Index of the largest element along `axis` (u32 tensor; the axis is removed).
    pub fn argmax(&self, axis: isize) -> Result<RawTensor> {
        self.check_f32("argmax")?;
        let axis = resolve_axis("argmax", axis, self.rank())?;
        if self.shape()[axis] == 0 {
            return Err(Error::shape("argmax", format!("empty axis {axis} of {:?}", self.shape())));
        }
        let x = self.contiguous()?;
        let storage = x.device().backend().argmax(x.storage(), dims_around(x.shape(), axis))?;
        let mut shape = x.shape().to_vec();
        shape.remove(axis);
        Ok(RawTensor::from_kernel(storage, &shape, x.device()))
    }

    /// Sums a broadcast gradient back to `shape` (the adjoint of `broadcast_to`).
    pub fn sum_to_shape(&self, shape: &[usize]) -> Result<RawTensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let lead = self.rank().checked_sub(shape.len()).ok_or_else(|| {
            Error::shape("sum_to_shape", format!("cannot sum {:?} down to higher rank {:?}", self.shape(), shape))
        })?;
        let mut axes: Vec<isize> = (0..lead as isize).collect();
        for (i, &d) in shape.iter().enumerate() {
            if d == 1 && self.shape()[lead + i] != 1 {
                axes.push((lead + i) as isize);
            } else if d != self.shape()[lead + i] {
                return Err(Error::shape("sum_to_shape", format!("cannot sum {:?} down to {:?}", self.shape(), shape)));
            }
        }
        self.sum(&axes, true)?.reshape(shape)
    }
}
