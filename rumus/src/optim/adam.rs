//! Adam (`torch.optim.Adam`, L2 weight decay) and AdamW (`torch.optim.AdamW`, decoupled decay).

use super::state::{check, lr_and_state_methods, StateTable};
use super::{Optimizer, OptimizerState};
use crate::nn::Param;
use crate::ops::OptimizerStep;
use crate::{Gradients, Result};

/// The settings Adam and AdamW share.
#[derive(Debug)]
struct AdamCore {
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    state: StateTable,
}

impl AdamCore {
    fn new(lr: f32, weight_decay: f32) -> Self {
        AdamCore {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
            state: StateTable::new(&["exp_avg", "exp_avg_sq"]),
        }
    }

    fn step(&mut self, op: &'static str, decoupled: bool, params: &[(String, Param)], grads: &Gradients) -> Result<()> {
        check(op, "lr", self.lr, self.lr >= 0.0)?;
        check(op, "beta1", self.beta1, (0.0..1.0).contains(&self.beta1))?;
        check(op, "beta2", self.beta2, (0.0..1.0).contains(&self.beta2))?;
        check(op, "eps", self.eps, self.eps >= 0.0)?;
        check(op, "weight_decay", self.weight_decay, self.weight_decay >= 0.0)?;
        let (lr, beta1, beta2, eps, weight_decay) = (self.lr, self.beta1, self.beta2, self.eps, self.weight_decay);
        self.state.step(params, grads, |steps| OptimizerStep::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            step: u32::try_from(steps).unwrap_or(u32::MAX),
        })
    }
}

macro_rules! adam_variant {
    ($(#[$doc:meta])* $name:ident, $torch:literal, $decoupled:expr, $default_wd:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name(AdamCore);

        impl $name {
            /// Learning rate `lr`, betas (0.9, 0.999), eps 1e-8, PyTorch's default weight decay.
            pub fn new(lr: f32) -> Self {
                $name(AdamCore::new(lr, $default_wd))
            }

            pub fn betas(mut self, beta1: f32, beta2: f32) -> Self {
                self.0.beta1 = beta1;
                self.0.beta2 = beta2;
                self
            }

            pub fn eps(mut self, eps: f32) -> Self {
                self.0.eps = eps;
                self
            }

            pub fn weight_decay(mut self, weight_decay: f32) -> Self {
                self.0.weight_decay = weight_decay;
                self
            }
        }

        impl Optimizer for $name {
            fn name(&self) -> &'static str {
                $torch
            }

            fn step(&mut self, params: &[(String, Param)], grads: &Gradients) -> Result<()> {
                self.0.step($torch, $decoupled, params, grads)
            }

            lr_and_state_methods!(.0);
        }
    };
}

adam_variant!(
    /// `torch.optim.Adam`: weight decay is an L2 term added to the gradient (default 0).
    Adam, "Adam", false, 0.0
);
adam_variant!(
    /// `torch.optim.AdamW`: decoupled weight decay `p *= 1 - lr·wd` (default 0.01).
    AdamW, "AdamW", true, 0.01
);
