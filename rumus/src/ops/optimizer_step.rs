//! The fused optimizer update (SGD, Adam/AdamW, RMSprop): one kernel pass per parameter that
//! updates the parameter and its state buffers in place, outside autograd.

use crate::backend::OptimizerStep;
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// Applies `step` to `param` with gradient `grad`, updating `param` and its `state` buffers (as
/// `OptimizerStep` lists them for each optimizer) in place. The parameter and its buffers must be
/// contiguous f32 tensors of one shape on one device (as `Param` and the optimizers make them).
pub(crate) fn optimizer_step(
    step: &OptimizerStep,
    param: &RawTensor,
    grad: &RawTensor,
    state: &[RawTensor],
) -> Result<()> {
    const OP: &str = "optimizer step";
    for t in std::iter::once(grad).chain(state) {
        t.check_f32(OP)?;
        param.check_same_device(OP, t)?;
        if t.shape() != param.shape() {
            return Err(Error::shape(OP, format!("parameter has shape {:?}, operand {:?}", param.shape(), t.shape())));
        }
    }
    param.check_f32(OP)?;
    if !param.is_contiguous() || state.iter().any(|s| !s.is_contiguous()) {
        return Err(Error::invalid(OP, "the parameter and its state buffers must be contiguous (updated in place)"));
    }
    // The kernel reads `len` elements from the start of each storage.
    let grad = grad.contiguous()?;
    let state: Vec<_> = if matches!(step, OptimizerStep::Sgd { momentum, .. } if *momentum == 0.0) {
        // Plain SGD keeps no velocity: the kernel gets no state buffer.
        Vec::new()
    } else {
        state.iter().map(RawTensor::storage).collect()
    };
    param.device().backend().optimizer_step(step, param.storage(), grad.storage(), &state, param.numel())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    fn sgd() -> OptimizerStep {
        OptimizerStep::Sgd {
            lr: 0.5,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            first_step: true,
        }
    }

    #[test]
    fn steps_the_parameter_in_place_from_a_strided_gradient() {
        let cpu = Device::cpu();
        let param = RawTensor::from_vec(vec![1., 1., 1., 1.], &[2, 2], &cpu).unwrap();
        let grad = RawTensor::from_vec(vec![1., 2., 3., 4.], &[2, 2], &cpu).unwrap().transpose(0, 1).unwrap();
        optimizer_step(&sgd(), &param, &grad, &[]).unwrap();
        assert_eq!(param.to_vec().unwrap(), vec![0.5, -0.5, 0., -1.]);
    }

    #[test]
    fn refuses_mismatched_operands_and_views() {
        let cpu = Device::cpu();
        let param = RawTensor::zeros(&[2, 2], &cpu).unwrap();
        let err = optimizer_step(&sgd(), &param, &RawTensor::zeros(&[4], &cpu).unwrap(), &[]).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{err}");
        let view = param.transpose(0, 1).unwrap();
        let err = optimizer_step(&sgd(), &view, &param, &[]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    }
}
