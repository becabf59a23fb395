//! Finite differences against autograd for every trainable parameter of a layer.

use rumus::nn::{named_params, Module};
use rumus::testing::GradCheck;
use rumus::{no_grad, RawTensor, Result};

/// Finite differences against autograd for every trainable parameter of `module` on `x`: the
/// loss is `sum(forward(x) · w)` with fixed weights `w`, each parameter element is moved by
/// `±eps` in place and restored. Buffers (batch-norm running statistics) take no gradient and
/// are left out.
pub fn param_grad_check(module: &dyn Module, x: &RawTensor) -> Result<()> {
    let GradCheck { eps, tolerance } = GradCheck::default();
    let out = module.forward_raw(x)?;
    let weights = RawTensor::rand_uniform(out.shape(), 0.5, 1.5, 0x5eed, x.device())?.to_vec()?;
    let loss = || -> Result<f64> {
        let out = no_grad(|| module.forward_raw(x))?.to_vec()?;
        Ok(out.iter().zip(&weights).map(|(&o, &w)| o as f64 * w as f64).sum())
    };
    let w = RawTensor::from_vec(weights.clone(), out.shape(), x.device())?;
    let grads = out.mul(&w)?.sum_all()?.backward()?;
    for (name, param) in named_params(module).into_iter().filter(|(_, p)| p.is_trainable()) {
        let analytic = grads.get(param.tensor()).expect("every parameter gets a gradient").to_vec()?;
        let base = param.to_vec()?;
        for i in 0..base.len() {
            let mut probe = base.clone();
            probe[i] = base[i] + eps;
            param.assign(&RawTensor::from_vec(probe.clone(), param.shape(), x.device())?)?;
            let up = loss()?;
            probe[i] = base[i] - eps;
            param.assign(&RawTensor::from_vec(probe, param.shape(), x.device())?)?;
            let down = loss()?;
            param.assign(&RawTensor::from_vec(base.clone(), param.shape(), x.device())?)?;
            let numeric = (up - down) / (2.0 * eps as f64);
            let a = analytic[i] as f64;
            assert!(
                (numeric - a).abs() <= tolerance as f64 * a.abs().max(1.0),
                "{name}[{i}]: analytic {a}, numeric {numeric}"
            );
        }
    }
    Ok(())
}
