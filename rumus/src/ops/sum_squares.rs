//! The sum of the squares of many tensors in one op: gradient clipping's global norm (what
//! PyTorch's `clip_grad_norm_` gets from `torch._foreach_norm`), in one kernel pass per tensor
//! and one reduction for all of them, instead of a square, a sum and an add per tensor.

use crate::backend::Storage;
use crate::tensor::RawTensor;
use crate::{Error, Result};

const OP: &str = "sum_squares";

/// The sum of the squares of every element of `tensors` (any layouts), as a scalar tensor on
/// their device, accumulated in an order fixed by their sizes (the same bits run to run).
///
/// Outside autograd: the result has no graph, whatever the inputs require (it is meant for
/// gradients). Errors, before any kernel runs: an empty list ([`Error::InvalidArgument`]), a
/// tensor that is not f32 ([`Error::DType`]), tensors on different devices
/// ([`Error::DeviceMismatch`]).
pub(crate) fn sum_squares(tensors: &[&RawTensor]) -> Result<RawTensor> {
    let first = tensors.first().ok_or_else(|| Error::invalid(OP, "no tensors to sum the squares of"))?;
    for t in tensors {
        t.check_f32(OP)?;
        first.check_same_device(OP, t)?;
    }
    // The kernels read each storage from its start.
    let _no_grad = crate::autograd::NoGradGuard::new();
    let contiguous = tensors.iter().map(|t| t.contiguous()).collect::<Result<Vec<_>>>()?;
    let parts: Vec<(&Storage, usize)> = contiguous.iter().map(|t| (t.storage(), t.numel())).collect();
    let storage = first.device().backend().sum_squares(&parts)?;
    Ok(RawTensor::from_kernel(storage, &[], first.device()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn sums_the_squares_of_views_and_empty_tensors() {
        let cpu = Device::cpu();
        let a = RawTensor::from_vec(vec![1., 2., 3., 4.], &[2, 2], &cpu).unwrap().transpose(0, 1).unwrap();
        let b = RawTensor::from_vec(vec![0.5, -2.0, 9.0], &[3], &cpu).unwrap().narrow(0, 0, 2).unwrap();
        let empty = RawTensor::zeros(&[0, 3], &cpu).unwrap();
        let total = sum_squares(&[&a, &b, &empty]).unwrap();
        assert_eq!((total.shape(), total.item().unwrap()), (&[][..], 30.0 + 0.25 + 4.0));
        assert_eq!(sum_squares(&[&empty]).unwrap().item().unwrap(), 0.0);
    }

    #[test]
    fn refuses_no_tensors_and_other_dtypes() {
        let cpu = Device::cpu();
        assert!(matches!(sum_squares(&[]).unwrap_err(), Error::InvalidArgument { op: OP, .. }));
        let idx = RawTensor::from_indices(&[1, 2], &[2], &cpu).unwrap();
        let x = RawTensor::ones(&[2], &cpu).unwrap();
        assert!(matches!(sum_squares(&[&x, &idx]).unwrap_err(), Error::DType { op: OP, .. }));
    }
}
