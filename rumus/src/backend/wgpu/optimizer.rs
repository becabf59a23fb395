//! `optimizer.wgsl`: one fused update step of SGD (with or without momentum), Adam/AdamW and
//! RMSprop, in place on a parameter and its state buffers.

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{DType, OptimizerStep, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "optimizer";

kernel_params! {
    /// `n` parameters; `flags` bit 0 Nesterov, bit 1 first SGD step, bit 2 decoupled weight
    /// decay; `a`, `b` are SGD's momentum and dampening, Adam's betas or RMSprop's alpha and
    /// momentum; `bias1`, `bias2` Adam's bias corrections.
    struct OptimizerParams {
        n: u32,
        flags: u32,
        lr: f32,
        weight_decay: f32,
        a: f32,
        b: f32,
        eps: f32,
        bias1: f32,
        bias2: f32,
    } pad 3
}

impl WgpuBackend {
    pub(super) fn optimizer_kernel(
        &self,
        step: &OptimizerStep,
        param: &Storage,
        grad: &Storage,
        state: &[&Storage],
        len: usize,
    ) -> Result<()> {
        let (p, g) = (self.gpu(param, DType::F32, OP)?, self.gpu(grad, DType::F32, OP)?);
        check_len(OP, p, len)?;
        check_len(OP, g, len)?;
        let states = state.iter().map(|s| self.gpu(s, DType::F32, OP)).collect::<Result<Vec<_>>>()?;
        for s in &states {
            check_len(OP, s, len)?;
        }
        let groups = self.groups_for(len, OP)?;
        let run = |entry, signature: &[Access], params: &OptimizerParams, states: &[&WgpuStorage]| {
            let buffers: Vec<_> = [p, g].into_iter().chain(states.iter().copied()).map(bind).collect();
            self.run(&pipelines::OPTIMIZER, entry, signature, params, &buffers, groups)
        };
        let n = len as u32;
        match *step {
            OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, first_step } => {
                let flags = nesterov as u32 | (first_step as u32) << 1;
                let (a, b) = (momentum, dampening);
                let params = OptimizerParams {
                    n,
                    flags,
                    lr,
                    weight_decay,
                    a,
                    b,
                    eps: 0.0,
                    bias1: 0.0,
                    bias2: 0.0,
                    _pad: [0; 3],
                };
                if momentum != 0.0 {
                    run("sgd_momentum", &[W, R, W], &params, needed(&states, 1)?)
                } else {
                    run("sgd", &[W, R], &params, &[])
                }
            }
            OptimizerStep::Adam { lr, beta1, beta2, eps, weight_decay, decoupled, step } => {
                let states = needed(&states, 2)?;
                let bias1 = 1.0 - beta1.powi(step as i32);
                let bias2 = 1.0 - beta2.powi(step as i32);
                let flags = (decoupled as u32) << 2;
                let params =
                    OptimizerParams { n, flags, lr, weight_decay, a: beta1, b: beta2, eps, bias1, bias2, _pad: [0; 3] };
                run("adam", &[W, R, W, W], &params, states)
            }
            OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum } => {
                let states = needed(&states, 2)?;
                let params = OptimizerParams {
                    n,
                    flags: 0,
                    lr,
                    weight_decay,
                    a: alpha,
                    b: momentum,
                    eps,
                    bias1: 0.0,
                    bias2: 0.0,
                    _pad: [0; 3],
                };
                run("rmsprop", &[W, R, W, W], &params, states)
            }
        }
    }
}

/// The first `k` state buffers, an error when the caller passed fewer.
fn needed<'s, 'a>(states: &'s [&'a WgpuStorage], k: usize) -> Result<&'s [&'a WgpuStorage]> {
    states
        .get(..k)
        .ok_or_else(|| Error::invalid(OP, format!("this optimizer needs {k} state buffers, got {}", states.len())))
}
