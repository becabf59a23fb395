//! Fused optimizer updates, one pass over a parameter and its state. Formulas follow PyTorch's
//! `torch.optim` (SGD, Adam/AdamW, RMSprop) so hyper-parameters mean the same thing. Beside
//! them, dynamic loss scaling's unscale-and-check of a gradient ([`unscale_grad`]).
//!
//! The loops walk zipped slices with every option decided before the loop: no bounds checks and
//! no branches per element, so they vectorise (a per-element `if decoupled` and indexed access
//! kept Adam scalar, a third of an MLP training step).

use rayon::prelude::*;

use super::parallel::PAR_THRESHOLD;
use crate::backend::OptimizerStep;

/// Elements per task of a parallel [`unscale_grad`].
const UNSCALE_CHUNK: usize = 1 << 14;

pub fn optimizer_step(step: &OptimizerStep, param: &mut [f32], grad: &[f32], state: &mut [&mut [f32]]) {
    match *step {
        OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, first_step } => {
            if momentum == 0.0 {
                for (p, &g) in param.iter_mut().zip(grad) {
                    *p -= lr * (g + weight_decay * *p);
                }
                return;
            }
            // The first step starts the velocity at the gradient itself (no dampening).
            let (keep, add) = if first_step { (0.0, 1.0) } else { (momentum, 1.0 - dampening) };
            for ((p, &g), buf) in param.iter_mut().zip(grad).zip(state[0].iter_mut()) {
                let g = g + weight_decay * *p;
                *buf = keep * *buf + add * g;
                let step = if nesterov { g + momentum * *buf } else { *buf };
                *p -= lr * step;
            }
        }
        OptimizerStep::Adam { lr, beta1, beta2, eps, weight_decay, decoupled, step } => {
            let bias1 = 1.0 - beta1.powi(step as i32);
            let bias2 = 1.0 - beta2.powi(step as i32);
            // AdamW shrinks the parameter; Adam adds an L2 term to the gradient.
            let (shrink, l2) = if decoupled { (1.0 - lr * weight_decay, 0.0) } else { (1.0, weight_decay) };
            let (m, rest) = state.split_at_mut(1);
            let (m, v) = (&mut *m[0], &mut *rest[0]);
            for (((p, &g), m), v) in param.iter_mut().zip(grad).zip(m.iter_mut()).zip(v.iter_mut()) {
                let g = g + l2 * *p;
                *p *= shrink;
                *m = beta1 * *m + (1.0 - beta1) * g;
                *v = beta2 * *v + (1.0 - beta2) * g * g;
                let m_hat = *m / bias1;
                let v_hat = *v / bias2;
                *p -= lr * m_hat / (v_hat.sqrt() + eps);
            }
        }
        OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum } => {
            let (sq, rest) = state.split_at_mut(1);
            let (sq, buf) = (&mut *sq[0], &mut *rest[0]);
            if momentum > 0.0 {
                for (((p, &g), sq), buf) in param.iter_mut().zip(grad).zip(sq.iter_mut()).zip(buf.iter_mut()) {
                    let g = g + weight_decay * *p;
                    *sq = alpha * *sq + (1.0 - alpha) * g * g;
                    *buf = momentum * *buf + g / (sq.sqrt() + eps);
                    *p -= lr * *buf;
                }
            } else {
                for ((p, &g), sq) in param.iter_mut().zip(grad).zip(sq.iter_mut()) {
                    let g = g + weight_decay * *p;
                    *sq = alpha * *sq + (1.0 - alpha) * g * g;
                    *p -= lr * (g / (sq.sqrt() + eps));
                }
            }
        }
    }
}

/// `out[i] = grad[i] · inv_scale` (equally long slices); returns whether some `grad[i]` is NaN or
/// infinite, or its product overflowed to infinity. In parallel chunks when large.
pub fn unscale_grad(out: &mut [f32], grad: &[f32], inv_scale: f32) -> bool {
    // No early exit and no branch per element: the loop vectorises, the flag is an OR.
    let chunk = |out: &mut [f32], grad: &[f32]| {
        let mut bad = false;
        for (o, &g) in out.iter_mut().zip(grad) {
            let y = g * inv_scale;
            *o = y;
            bad |= !g.is_finite() | !y.is_finite();
        }
        bad
    };
    if grad.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(UNSCALE_CHUNK)
            .zip(grad.par_chunks(UNSCALE_CHUNK))
            .map(|(o, g)| chunk(o, g))
            .reduce(|| false, |a, b| a | b)
    } else {
        chunk(out, grad)
    }
}
