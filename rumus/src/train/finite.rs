//! Whether a module's weights are all finite: the state after a step, which a loss computed
//! before the step cannot vouch for.

use crate::nn::{named_params, Module};
use crate::ops::{unscale_grad, DType, NonFiniteFlags};
use crate::Result;

/// True when every f32 parameter and buffer of `module` is finite (integer buffers always are).
/// Runs on the weights' device with the loss scaler's check (`unscale_grad` by 1: a bit test
/// per element, raising one flag per device) and reads one number per device.
pub(crate) fn weights_finite(module: &dyn Module) -> Result<bool> {
    let _no_grad = crate::autograd::NoGradGuard::new();
    let mut flags = NonFiniteFlags::default();
    for (_, param) in named_params(module) {
        let t = param.tensor();
        if t.numel() > 0 && t.dtype() == DType::F32 {
            unscale_grad(t, 1.0, &flags.on(t.device())?)?;
        }
    }
    Ok(!flags.any_raised()?)
}
