//! Gradient accumulation: the gradients of several backward passes summed per parameter.

use crate::nn::Param;
use crate::{Gradients, Result};

/// Adds `grads` into `sum` (or makes it `sum` when there is none yet), for every trainable
/// parameter in `params`, each tensor once. Gradients of other tensors are dropped.
pub(crate) fn add_gradients(
    params: &[(String, Param)],
    sum: &mut Option<Gradients>,
    mut grads: Gradients,
) -> Result<()> {
    let Some(total) = sum else {
        *sum = Some(grads);
        return Ok(());
    };
    let _no_grad = crate::autograd::NoGradGuard::new();
    for (_, param) in crate::nn::unique_trainable(params) {
        let Some(g) = grads.remove(param.tensor()) else {
            continue;
        };
        let added = match total.remove(param.tensor()) {
            Some(t) => t.add(&g)?,
            None => g,
        };
        total.insert(param.tensor().id(), added);
    }
    Ok(())
}
