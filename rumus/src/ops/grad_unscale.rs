//! Dynamic loss scaling's unscale-and-check (PyTorch's internal
//! `torch._amp_foreach_non_finite_check_and_unscale_`, one tensor at a time): a gradient divided
//! by the loss scale and checked for NaN and infinite values in one kernel pass, outside
//! autograd. [`LossScaler`](crate::optim::LossScaler) runs it on every gradient of a step with
//! one flag per device, then reads each flag once.

use crate::backend::DType;
use crate::tensor::RawTensor;
use crate::{Device, Error, Result};

const OP: &str = "unscale_grad";

/// A zeroed non-finite flag on `device` for [`unscale_grad`]: one u32 element, read with
/// [`RawTensor::to_vec_u32`] (nonzero: some gradient was NaN or infinite).
pub(crate) fn non_finite_flag(device: &Device) -> Result<RawTensor> {
    RawTensor::from_indices(&[0], &[1], device)
}

/// One [`non_finite_flag`] per device, made when first asked for: what a check over tensors on
/// several devices raises ([`LossScaler`](crate::optim::LossScaler), the weights' check of
/// `fit`), read once per device at the end.
#[derive(Default)]
pub(crate) struct NonFiniteFlags {
    flags: Vec<RawTensor>,
}

impl NonFiniteFlags {
    /// The flag of `device`.
    pub(crate) fn on(&mut self, device: &Device) -> Result<RawTensor> {
        if let Some(flag) = self.flags.iter().find(|f| f.device().same(device)) {
            return Ok(flag.clone());
        }
        let flag = non_finite_flag(device)?;
        self.flags.push(flag.clone());
        Ok(flag)
    }

    /// Whether any flag was raised: one read per device.
    pub(crate) fn any_raised(&self) -> Result<bool> {
        for flag in &self.flags {
            if flag.to_vec_u32()?.iter().any(|&f| f != 0) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// `grad · inv_scale`, a new contiguous tensor of `grad`'s shape (any layout is read), and in
/// one pass over it: `found` (a contiguous one-element u32 tensor on `grad`'s device, as
/// [`non_finite_flag`] makes it) is set to a nonzero value, in place, when some element of
/// `grad` is NaN or ±infinite or its product overflows to ±infinite, and left as it was
/// otherwise, so one flag accumulates over every gradient of a step.
///
/// Outside autograd: the result has no graph, whatever `grad` requires (it is meant for
/// gradients, which are not differentiated again). Errors, before any kernel runs: `grad` not
/// f32 or `found` not u32 ([`Error::DType`]), `found` not of exactly one element
/// ([`Error::Shape`]) or a view into a larger storage, or `inv_scale` NaN or infinite
/// ([`Error::InvalidArgument`]), and the two on different devices ([`Error::DeviceMismatch`]).
pub(crate) fn unscale_grad(grad: &RawTensor, inv_scale: f32, found: &RawTensor) -> Result<RawTensor> {
    grad.check_f32(OP)?;
    if found.dtype() != DType::U32 {
        return Err(Error::DType { op: OP, expected: "u32", got: found.dtype().name() });
    }
    grad.check_same_device(OP, found)?;
    if found.numel() != 1 {
        return Err(Error::shape(
            OP,
            format!("the non-finite flag must hold exactly one u32, its shape is {:?}", found.shape()),
        ));
    }
    if !found.is_contiguous() {
        return Err(Error::invalid(OP, "the non-finite flag is written in place: it must start its storage"));
    }
    if !inv_scale.is_finite() {
        return Err(Error::invalid(OP, format!("inverse scale {inv_scale} must be finite")));
    }
    // The kernel reads `len` elements from the start of the storage.
    let grad = grad.contiguous()?;
    let storage = grad.device().backend().unscale_grad(grad.storage(), grad.numel(), inv_scale, found.storage())?;
    Ok(RawTensor::from_kernel(storage, grad.shape(), grad.device()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unscales_a_strided_gradient_and_accumulates_the_flag() {
        let cpu = Device::cpu();
        let flag = non_finite_flag(&cpu).unwrap();
        let grad = RawTensor::from_vec(vec![2., 4., 6., 8.], &[2, 2], &cpu).unwrap().transpose(0, 1).unwrap();
        let out = unscale_grad(&grad, 0.5, &flag).unwrap();
        assert_eq!((out.shape(), out.to_vec().unwrap()), (&[2usize, 2][..], vec![1., 3., 2., 4.]));
        assert_eq!(flag.to_vec_u32().unwrap(), [0]);
        let bad = RawTensor::from_vec(vec![1., f32::NAN], &[2], &cpu).unwrap();
        assert!(unscale_grad(&bad, 0.5, &flag).unwrap().to_vec().unwrap()[1].is_nan());
        assert_ne!(flag.to_vec_u32().unwrap(), [0]);
        unscale_grad(&grad, 0.5, &flag).unwrap();
        assert_ne!(flag.to_vec_u32().unwrap(), [0], "a finite gradient leaves a raised flag raised");
    }

    #[test]
    fn refuses_bad_flags_and_scales() {
        let cpu = Device::cpu();
        let grad = RawTensor::ones(&[3], &cpu).unwrap();
        let flag = non_finite_flag(&cpu).unwrap();
        let err = unscale_grad(&grad, 0.5, &RawTensor::zeros(&[1], &cpu).unwrap()).unwrap_err();
        assert!(matches!(err, Error::DType { op: OP, .. }), "{err}");
        let err = unscale_grad(&grad, 0.5, &RawTensor::from_indices(&[0, 0], &[2], &cpu).unwrap()).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{err}");
        let view = RawTensor::from_indices(&[0, 0], &[2], &cpu).unwrap().narrow(0, 1, 2).unwrap();
        let err = unscale_grad(&grad, 0.5, &view).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        for s in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let err = unscale_grad(&grad, s, &flag).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        }
        let err = unscale_grad(&flag, 0.5, &flag).unwrap_err();
        assert!(matches!(err, Error::DType { .. }), "{err}");
        assert_eq!(flag.to_vec_u32().unwrap(), [0]);
    }
}
