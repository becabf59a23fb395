//! Joining tensors: `concat` along an existing axis and `stack` along a new one. The output is
//! allocated once and each input is copied into its sub-view on the device; the backward hands
//! each input the matching slice of the gradient (a view, no copy).

use crate::autograd::BackwardOp;
use crate::backend::{DType, Storage};
use crate::layout::resolve_axis;
use crate::tensor::RawTensor;
use crate::{Error, Layout, Result};

struct ConcatBackward {
    axis: usize,
    sizes: Vec<usize>,
}

impl BackwardOp for ConcatBackward {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn backward(&self, _: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let mut start = 0;
        let mut grads = Vec::with_capacity(self.sizes.len());
        for &size in &self.sizes {
            grads.push(Some(grad.narrow(self.axis as isize, start, start + size)?));
            start += size;
        }
        Ok(grads)
    }
}

struct StackBackward {
    axis: usize,
}

impl BackwardOp for StackBackward {
    fn name(&self) -> &'static str {
        "stack"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        (0..inputs.len())
            .map(|i| Ok(Some(grad.narrow(self.axis as isize, i, i + 1)?.reshape(inputs[i].shape())?)))
            .collect()
    }
}

/// Checks that `tensors` is non-empty and shares dtype and device; returns the first.
fn check_joinable<'a>(op: &'static str, tensors: &[&'a RawTensor]) -> Result<&'a RawTensor> {
    let Some(&first) = tensors.first() else {
        return Err(Error::invalid(op, "needs at least one tensor"));
    };
    for t in &tensors[1..] {
        first.check_same_device(op, t)?;
        if t.dtype() != first.dtype() {
            return Err(Error::DType { op, expected: first.dtype().name(), got: t.dtype().name() });
        }
    }
    Ok(first)
}

/// A storage for `len` elements of `dtype` on `first`'s device.
fn allocate(first: &RawTensor, len: usize) -> Result<Storage> {
    let backend = first.device().backend();
    match first.dtype() {
        DType::F32 => backend.full(len, 0.0),
        DType::U32 => backend.from_u32(&crate::backend::cpu::try_filled("concat", len, 0u32)?),
    }
}

fn shapes_of(tensors: &[&RawTensor]) -> String {
    let shapes: Vec<String> = tensors.iter().map(|t| format!("{:?}", t.shape())).collect();
    shapes.join(", ")
}

impl RawTensor {
    /// Joins tensors along an existing `axis`; all other axes must agree.
    pub fn concat(tensors: &[&RawTensor], axis: isize) -> Result<RawTensor> {
        const OP: &str = "concat";
        let first = check_joinable(OP, tensors)?;
        if first.rank() == 0 {
            return Err(Error::shape(OP, "cannot concatenate rank-0 tensors; use stack"));
        }
        let axis = resolve_axis(OP, axis, first.rank())?;
        for t in tensors {
            let agrees = t.rank() == first.rank()
                && t.shape().iter().zip(first.shape()).enumerate().all(|(d, (a, b))| d == axis || a == b);
            if !agrees {
                return Err(Error::shape(OP, format!("shapes [{}] differ outside axis {axis}", shapes_of(tensors))));
            }
        }
        let sizes: Vec<usize> = tensors.iter().map(|t| t.shape()[axis]).collect();
        let mut shape = first.shape().to_vec();
        shape[axis] = sizes.iter().try_fold(0usize, |acc, &d| acc.checked_add(d)).ok_or_else(|| {
            Error::shape(OP, format!("the sizes along axis {axis} of [{}] overflow", shapes_of(tensors)))
        })?;
        crate::layout::checked_numel(OP, &shape)?;
        let out_layout = Layout::contiguous(&shape);
        let out = allocate(first, out_layout.numel())?;
        let backend = first.device().backend();
        let mut start = 0;
        for (t, &size) in tensors.iter().zip(&sizes) {
            let window = out_layout.narrow(axis, start, start + size)?;
            backend.copy_strided(t.storage(), t.layout(), &out, &window)?;
            start += size;
        }
        Ok(RawTensor::from_op(out, out_layout, first.device().clone(), tensors, || {
            Box::new(ConcatBackward { axis, sizes })
        }))
    }

    /// Joins equally shaped tensors along a new `axis` (`0..=rank`; negative counts from the end
    /// of the output's axes).
    pub fn stack(tensors: &[&RawTensor], axis: isize) -> Result<RawTensor> {
        const OP: &str = "stack";
        let first = check_joinable(OP, tensors)?;
        let axis = resolve_axis(OP, axis, first.rank() + 1)?;
        if tensors.iter().any(|t| t.shape() != first.shape()) {
            return Err(Error::shape(OP, format!("shapes [{}] must all be equal", shapes_of(tensors))));
        }
        let mut shape = first.shape().to_vec();
        shape.insert(axis, tensors.len());
        crate::layout::checked_numel(OP, &shape)?;
        let out_layout = Layout::contiguous(&shape);
        let out = allocate(first, out_layout.numel())?;
        let backend = first.device().backend();
        for (i, t) in tensors.iter().enumerate() {
            // Slot i along `axis`, with that axis dropped so it has the input's shape.
            let slot = out_layout.narrow(axis, i, i + 1)?;
            let mut strides = slot.strides().to_vec();
            strides.remove(axis);
            let window = Layout::new(first.shape().to_vec(), strides, slot.offset())?;
            backend.copy_strided(t.storage(), t.layout(), &out, &window)?;
        }
        Ok(RawTensor::from_op(out, out_layout, first.device().clone(), tensors, || Box::new(StackBackward { axis })))
    }
}
