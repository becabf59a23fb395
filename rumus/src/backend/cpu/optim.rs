//! Fused optimizer updates, one pass over a parameter and its state. Formulas follow PyTorch's
//! `torch.optim` (SGD, Adam/AdamW, RMSprop) so hyper-parameters mean the same thing.

use crate::backend::OptimizerStep;

pub fn optimizer_step(step: &OptimizerStep, param: &mut [f32], grad: &[f32], state: &mut [&mut [f32]]) {
    match *step {
        OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, first_step } => {
            for i in 0..param.len() {
                let mut g = grad[i] + weight_decay * param[i];
                if momentum != 0.0 {
                    let buf = &mut state[0][i];
                    *buf = if first_step { g } else { momentum * *buf + (1.0 - dampening) * g };
                    g = if nesterov { g + momentum * *buf } else { *buf };
                }
                param[i] -= lr * g;
            }
        }
        OptimizerStep::Adam { lr, beta1, beta2, eps, weight_decay, decoupled, step } => {
            let bias1 = 1.0 - beta1.powi(step as i32);
            let bias2 = 1.0 - beta2.powi(step as i32);
            let (m, rest) = state.split_at_mut(1);
            let (m, v) = (&mut m[0], &mut rest[0]);
            for i in 0..param.len() {
                let mut g = grad[i];
                if decoupled {
                    param[i] *= 1.0 - lr * weight_decay;
                } else {
                    g += weight_decay * param[i];
                }
                m[i] = beta1 * m[i] + (1.0 - beta1) * g;
                v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
                let m_hat = m[i] / bias1;
                let v_hat = v[i] / bias2;
                param[i] -= lr * m_hat / (v_hat.sqrt() + eps);
            }
        }
        OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum } => {
            let (sq, rest) = state.split_at_mut(1);
            let (sq, buf) = (&mut sq[0], &mut rest[0]);
            for i in 0..param.len() {
                let g = grad[i] + weight_decay * param[i];
                sq[i] = alpha * sq[i] + (1.0 - alpha) * g * g;
                let update = g / (sq[i].sqrt() + eps);
                if momentum > 0.0 {
                    buf[i] = momentum * buf[i] + update;
                    param[i] -= lr * buf[i];
                } else {
                    param[i] -= lr * update;
                }
            }
        }
    }
}
