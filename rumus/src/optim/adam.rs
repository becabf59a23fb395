//! Adam (`torch.optim.Adam`, L2 weight decay) and AdamW (`torch.optim.AdamW`, decoupled decay).

use super::state::{check, lr_and_state_methods, StateTable};
use super::DecayFilter;
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
    decay_filter: DecayFilter,
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
            decay_filter: DecayFilter::All,
            state: StateTable::new(&["exp_avg", "exp_avg_sq"]),
        }
    }

    fn step(&mut self, op: &'static str, decoupled: bool, params: &[(String, Param)], grads: &Gradients) -> Result<()> {
        check(op, "lr", self.lr, self.lr >= 0.0)?;
        check(op, "beta1", self.beta1, (0.0..1.0).contains(&self.beta1))?;
        check(op, "beta2", self.beta2, (0.0..1.0).contains(&self.beta2))?;
        check(op, "eps", self.eps, self.eps >= 0.0)?;
        check(op, "weight_decay", self.weight_decay, self.weight_decay >= 0.0)?;
        let (lr, beta1, beta2, eps) = (self.lr, self.beta1, self.beta2, self.eps);
        let (weight_decay, filter) = (self.weight_decay, self.decay_filter);
        self.state.step(params, grads, |steps, name, param| OptimizerStep::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay: if filter.decays(name, param.shape()) { weight_decay } else { 0.0 },
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

            /// The decay rates of the first and second moment estimates (default 0.9, 0.999); each must be
            /// in `[0, 1)`, checked at the first step.
            pub fn betas(mut self, beta1: f32, beta2: f32) -> Self {
                self.0.beta1 = beta1;
                self.0.beta2 = beta2;
                self
            }

            /// Added to the denominator `sqrt(v̂) + eps` for stability (default 1e-8).
            pub fn eps(mut self, eps: f32) -> Self {
                self.0.eps = eps;
                self
            }

            /// Weight decay factor (≥ 0): L2 added to the gradient for Adam, decoupled
            /// (`p -= lr·wd·p`) for AdamW.
            pub fn weight_decay(mut self, weight_decay: f32) -> Self {
                self.0.weight_decay = weight_decay;
                self
            }

            /// Applies the weight decay only to the parameters `filter` selects; the others
            /// are stepped with a weight decay of 0 (PyTorch's parameter groups).
            pub fn decay_filter(mut self, filter: DecayFilter) -> Self {
                self.0.decay_filter = filter;
                self
            }

            /// Decays only parameters of rank 2 or more (weight matrices, embeddings), not
            /// biases or norm weights, as nanoGPT's parameter groups do:
            /// `decay_filter(DecayFilter::MatricesOnly)`.
            pub fn decay_matrices_only(self) -> Self {
                self.decay_filter(DecayFilter::MatricesOnly)
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
