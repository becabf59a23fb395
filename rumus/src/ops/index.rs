//! Indexing with u32 index tensors: `index_select` (and `embedding` on top of it) with an
//! `index_add` backward, `gather` with a `scatter_add` backward, and `bincount` (weights summed
//! into bins by index, outside autograd) on the `index_add` kernel.
//!
//! Indices are range-checked by the kernels of every backend, which fail the call with
//! [`Error::IndexOutOfRange`] (the CPU's kernels scan the indices they read; see
//! `backend/wgpu/index_check.rs` for when the wgpu backend reads 4 bytes back).

use crate::autograd::BackwardOp;
use crate::backend::{DType, GatherArgs, IndexArgs};
use crate::layout::resolve_axis;
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// Fails unless `indices` is a u32 tensor on `x`'s device.
pub(crate) fn check_index_tensor(op: &'static str, x: &RawTensor, indices: &RawTensor) -> Result<()> {
    if indices.dtype() != DType::U32 {
        return Err(Error::DType { op, expected: "u32", got: indices.dtype().name() });
    }
    x.check_same_device(op, indices)
}

/// `result` with an out-of-range error credited to `op` (the public op built on an index kernel,
/// as the CPU's check names it).
pub(crate) fn renamed<T>(op: &'static str, result: Result<T>) -> Result<T> {
    result.map_err(|e| match e {
        Error::IndexOutOfRange { index, limit, position, .. } => Error::IndexOutOfRange { op, index, limit, position },
        other => other,
    })
}

struct IndexSelectBackward {
    indices: RawTensor,
    args: IndexArgs,
}

impl BackwardOp for IndexSelectBackward {
    fn name(&self) -> &'static str {
        "index_select"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let storage = grad.device().backend().index_add(grad.storage(), self.indices.storage(), &self.args)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, inputs[0].shape(), grad.device()))])
    }
}

struct GatherBackward {
    indices: RawTensor,
    args: GatherArgs,
}

impl BackwardOp for GatherBackward {
    fn name(&self) -> &'static str {
        "gather"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let storage = grad.device().backend().scatter_add(grad.storage(), self.indices.storage(), &self.args)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, inputs[0].shape(), grad.device()))])
    }
}

impl RawTensor {
    /// Picks the entries `indices` (u32, 1-D) along `axis`; the axis takes the index count.
    /// An index out of range is [`Error::IndexOutOfRange`] on every device.
    pub fn index_select(&self, axis: isize, indices: &RawTensor) -> Result<RawTensor> {
        const OP: &str = "index_select";
        self.check_f32(OP)?;
        check_index_tensor(OP, self, indices)?;
        if self.rank() == 0 {
            return Err(Error::shape(OP, "cannot index a rank-0 tensor"));
        }
        let axis = resolve_axis(OP, axis, self.rank())?;
        if indices.rank() != 1 {
            return Err(Error::shape(
                OP,
                format!("input {:?} indices {:?}: indices must be 1-D", self.shape(), indices.shape()),
            ));
        }
        let len = self.shape()[axis];
        let mut out_shape = self.shape().to_vec();
        out_shape[axis] = indices.numel();
        crate::layout::checked_numel(OP, &out_shape)?;
        let args = IndexArgs {
            outer: self.shape()[..axis].iter().product(),
            len,
            inner: self.shape()[axis + 1..].iter().product(),
            count: indices.numel(),
        };
        let (x, indices) = (self.contiguous()?, indices.contiguous()?);
        let storage = x.device().backend().index_select(x.storage(), indices.storage(), &args)?;
        let mut shape = x.shape().to_vec();
        shape[axis] = args.count;
        Ok(RawTensor::from_op_contiguous(storage, &shape, x.device(), &[&x], || {
            Box::new(IndexSelectBackward { indices, args })
        }))
    }

    /// Sums `weights` (f32 `[n]`) into `len` bins chosen by `self` (u32 `[n]`):
    /// `out[b] = Σ weights[j] over j with self[j] == b`, PyTorch's
    /// `torch.bincount(self, weights, minlength=len)` when every index is below `len` (one that
    /// is not is [`Error::IndexOutOfRange`]). Records no graph. The per-class counts of the
    /// training metrics: `O(n + len)` memory where one-hot rows would take `n · len`.
    pub(crate) fn bincount(&self, weights: &RawTensor, len: usize) -> Result<RawTensor> {
        const OP: &str = "bincount";
        weights.check_f32(OP)?;
        check_index_tensor(OP, weights, self)?;
        if self.rank() != 1 || weights.shape() != self.shape() {
            return Err(Error::shape(
                OP,
                format!("indices {:?} and weights {:?} must be one equal 1-D shape", self.shape(), weights.shape()),
            ));
        }
        if len == 0 {
            return Err(Error::invalid(OP, "needs at least one bin"));
        }
        let args = IndexArgs { outer: 1, len, inner: 1, count: self.numel() };
        let (weights, indices) = (weights.contiguous()?, self.contiguous()?);
        let storage = renamed(OP, weights.device().backend().index_add(weights.storage(), indices.storage(), &args))?;
        Ok(RawTensor::from_kernel(storage, &[len], weights.device()))
    }

    /// Looks up rows of `weight` (`[num_embeddings, dim]`) for the u32 indices in `self` (any
    /// shape); returns `self.shape() + [dim]`. Indices are range-checked like `index_select`'s.
    pub fn embedding(&self, weight: &RawTensor) -> Result<RawTensor> {
        const OP: &str = "embedding";
        check_index_tensor(OP, weight, self)?;
        if weight.rank() != 2 {
            return Err(Error::shape(OP, format!("weight {:?}: expected [num_embeddings, dim]", weight.shape())));
        }
        let flat = self.reshape(&[self.numel()])?;
        let rows = renamed(OP, weight.index_select(0, &flat))?;
        let mut shape = self.shape().to_vec();
        shape.push(weight.shape()[1]);
        rows.reshape(&shape)
    }

    /// `torch.gather`: `out[..., j, ...] = self[..., indices[..., j, ...], ...]` along `axis`.
    /// `indices` (u32) has `self`'s rank; along the other axes it may be shorter than `self`
    /// (only the leading part of `self` is read). The output has the shape of `indices`.
    pub fn gather(&self, axis: isize, indices: &RawTensor) -> Result<RawTensor> {
        const OP: &str = "gather";
        self.check_f32(OP)?;
        check_index_tensor(OP, self, indices)?;
        if self.rank() == 0 {
            return Err(Error::shape(OP, "cannot gather from a rank-0 tensor"));
        }
        let axis = resolve_axis(OP, axis, self.rank())?;
        let describe = || format!("input {:?} indices {:?}", self.shape(), indices.shape());
        if indices.rank() != self.rank() {
            return Err(Error::shape(OP, format!("{}: indices need the input's rank {}", describe(), self.rank())));
        }
        let mut x = self.clone();
        for (d, (&have, &want)) in self.shape().iter().zip(indices.shape()).enumerate() {
            if d == axis {
                continue;
            }
            if want > have {
                return Err(Error::shape(
                    OP,
                    format!("{}: indices are longer than the input on axis {d} ({want} > {have})", describe()),
                ));
            }
            if want < have {
                x = x.narrow(d as isize, 0, want)?;
            }
        }
        let len = x.shape()[axis];
        let args = GatherArgs {
            outer: indices.shape()[..axis].iter().product(),
            len,
            inner: indices.shape()[axis + 1..].iter().product(),
            count: indices.shape()[axis],
        };
        let (x, indices) = (x.contiguous()?, indices.contiguous()?);
        let storage = x.device().backend().gather(x.storage(), indices.storage(), &args)?;
        let shape = indices.shape().to_vec();
        Ok(RawTensor::from_op_contiguous(storage, &shape, x.device(), &[&x], || {
            Box::new(GatherBackward { indices, args })
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Error, RawTensor};

    #[test]
    fn bincount_sums_weights_by_index() {
        let cpu = Device::cpu();
        let idx = RawTensor::from_indices(&[2, 0, 2, 2, 1], &[5], &cpu).unwrap();
        let w = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0], &[5], &cpu).unwrap();
        // torch.bincount(torch.tensor([2, 0, 2, 2, 1]), torch.tensor([1., 2., 3., 4., 5.]), minlength=4)
        assert_eq!(idx.bincount(&w, 4).unwrap().to_vec().unwrap(), [2.0, 5.0, 8.0, 0.0]);
        assert!(matches!(idx.bincount(&w, 2), Err(Error::IndexOutOfRange { op: "bincount", .. })));
        assert!(matches!(idx.bincount(&w.reshape(&[5, 1]).unwrap(), 4), Err(Error::Shape { .. })));
        assert!(idx.bincount(&w, 0).is_err());
    }
}
