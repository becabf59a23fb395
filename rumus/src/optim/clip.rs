//! Gradient clipping by global norm (`torch.nn.utils.clip_grad_norm_`).

use crate::nn::Param;
use crate::{Error, Gradients, RawTensor, Result};

/// Scales every gradient by `min(1, max_norm / (norm + 1e-6))`, where `norm` is the L2 norm of
/// all gradients together, and returns that norm as a one-element tensor.
///
/// Everything runs with tensor ops on the gradients' device: nothing is read back to the host
/// (call `.item()` on the result if you want to log it).
pub fn clip_grad_norm(params: &[(String, Param)], grads: &mut Gradients, max_norm: f32) -> Result<RawTensor> {
    check_max_norm(max_norm)?;
    let _no_grad = crate::autograd::NoGradGuard::new();
    // Buffers have no say, and a tied weight counts (and is scaled) once.
    let with_grad: Vec<&Param> = crate::nn::unique_trainable(params)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| grads.get(p.tensor()).is_some())
        .collect();
    // One pass per gradient and one reduction for all (not a square, a sum and an add each).
    let total = {
        let gradients: Vec<&RawTensor> = with_grad.iter().filter_map(|p| grads.get(p.tensor())).collect();
        if gradients.is_empty() {
            return Err(Error::invalid("clip_grad_norm", "no parameter has a gradient"));
        }
        crate::ops::sum_squares::sum_squares(&gradients)?
    };
    let norm = total.sqrt()?;
    let coef = norm.add_scalar(1e-6)?.powf(-1.0)?.mul_scalar(max_norm)?.clamp(0.0, 1.0)?;
    for param in with_grad {
        if let Some(g) = grads.remove(param.tensor()) {
            grads.insert(param.tensor().id(), g.mul(&coef)?);
        }
    }
    Ok(norm)
}

/// `max_norm` must be positive and finite, else [`Error::InvalidArgument`] naming
/// `clip_grad_norm`; callers that clip later check it up front with this.
pub(super) fn check_max_norm(max_norm: f32) -> Result<()> {
    if !(max_norm > 0.0 && max_norm.is_finite()) {
        return Err(Error::invalid("clip_grad_norm", format!("max_norm = {max_norm} must be positive")));
    }
    Ok(())
}
