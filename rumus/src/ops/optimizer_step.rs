//! The fused optimizer update (SGD, Adam/AdamW, RMSprop): kernel passes that update parameters
//! and their state buffers in place, outside autograd, many parameters per pass where the
//! backend can (`Backend::optimizer_steps`).

use crate::backend::{OptimizerStep, OptimizerUpdate};
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// One parameter's update for [`optimizer_steps`].
pub(crate) struct ParamUpdate<'a> {
    pub step: OptimizerStep,
    pub param: &'a RawTensor,
    pub grad: &'a RawTensor,
    /// The state buffers, as `OptimizerStep` lists them for each optimizer.
    pub state: &'a [RawTensor],
}

/// Applies each update's `step` to its `param` with its `grad`, updating `param` and its `state`
/// buffers in place, as if one after another. Every update is checked before any runs: the
/// parameter and its buffers must be contiguous f32 tensors of one shape on one device (as
/// `Param` and the optimizers make them).
pub(crate) fn optimizer_steps(updates: &[ParamUpdate<'_>]) -> Result<()> {
    const OP: &str = "optimizer step";
    let mut grads = Vec::with_capacity(updates.len());
    for u in updates {
        let param = u.param;
        for t in std::iter::once(u.grad).chain(u.state) {
            t.check_f32(OP)?;
            param.check_same_device(OP, t)?;
            if t.shape() != param.shape() {
                return Err(Error::shape(
                    OP,
                    format!("parameter has shape {:?}, operand {:?}", param.shape(), t.shape()),
                ));
            }
        }
        param.check_f32(OP)?;
        if !param.is_contiguous() || u.state.iter().any(|s| !s.is_contiguous()) {
            return Err(Error::invalid(
                OP,
                "the parameter and its state buffers must be contiguous (updated in place)",
            ));
        }
        // The kernel reads `len` elements from the start of each storage.
        grads.push(u.grad.contiguous()?);
    }
    let states: Vec<Vec<_>> = updates
        .iter()
        .map(|u| {
            if matches!(u.step, OptimizerStep::Sgd { momentum, .. } if momentum == 0.0) {
                // Plain SGD keeps no velocity: the kernel gets no state buffer.
                Vec::new()
            } else {
                u.state.iter().map(RawTensor::storage).collect()
            }
        })
        .collect();
    let kernel_updates: Vec<OptimizerUpdate<'_>> = updates
        .iter()
        .zip(&grads)
        .zip(&states)
        .map(|((u, grad), state)| OptimizerUpdate {
            step: u.step,
            param: u.param.storage(),
            grad: grad.storage(),
            state,
            len: u.param.numel(),
        })
        .collect();
    // One backend call per run of parameters on one device.
    let mut rest = &kernel_updates[..];
    let mut params = updates;
    while let Some(first) = params.first() {
        let n = params.iter().take_while(|u| u.param.device().same(first.param.device())).count();
        first.param.device().backend().optimizer_steps(&rest[..n])?;
        (rest, params) = (&rest[n..], &params[n..]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    fn step(param: &RawTensor, grad: &RawTensor) -> Result<()> {
        optimizer_steps(&[ParamUpdate { step: sgd(), param, grad, state: &[] }])
    }

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
        step(&param, &grad).unwrap();
        assert_eq!(param.to_vec().unwrap(), vec![0.5, -0.5, 0., -1.]);
    }

    #[test]
    fn refuses_mismatched_operands_and_views() {
        let cpu = Device::cpu();
        let param = RawTensor::zeros(&[2, 2], &cpu).unwrap();
        let err = step(&param, &RawTensor::zeros(&[4], &cpu).unwrap()).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{err}");
        let view = param.transpose(0, 1).unwrap();
        let err = step(&view, &param).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    }
}
