//! Whether a module's weights are all finite: the state after a step, which a loss computed
//! before the step cannot vouch for.

use crate::nn::{named_params, Module};
use crate::Result;

/// True when every parameter and buffer of `module` is finite. Runs on the weights' device
/// (`0·x` is NaN exactly for NaN and ±inf, and one NaN makes the sum NaN) and reads one
/// number per device.
pub(crate) fn weights_finite(module: &dyn Module) -> Result<bool> {
    let _no_grad = crate::autograd::NoGradGuard::new();
    let mut sums: Vec<crate::RawTensor> = Vec::new();
    for (_, param) in named_params(module) {
        let t = param.tensor();
        if t.numel() == 0 {
            continue;
        }
        let zeros = t.mul_scalar(0.0)?.sum_all()?;
        match sums.iter_mut().find(|s| s.device().same(t.device())) {
            Some(sum) => *sum = sum.add(&zeros)?,
            None => sums.push(zeros),
        }
    }
    for sum in sums {
        if !sum.item()?.is_finite() {
            return Ok(false);
        }
    }
    Ok(true)
}
