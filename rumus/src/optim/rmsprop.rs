//! RMSprop (`torch.optim.RMSprop`, not centered).

use super::state::{check, lr_and_state_methods, StateTable};
use super::{Optimizer, OptimizerState};
use crate::nn::Param;
use crate::ops::OptimizerStep;
use crate::{Gradients, Result};

/// `torch.optim.RMSprop`: `v = α·v + (1-α)·g²`, `u = g / (sqrt(v) + eps)`; with momentum
/// `buf = μ·buf + u`, `p -= lr·buf`, else `p -= lr·u`. Defaults: α 0.99, eps 1e-8.
#[derive(Debug)]
pub struct RmsProp {
    lr: f32,
    alpha: f32,
    eps: f32,
    weight_decay: f32,
    momentum: f32,
    state: StateTable,
}

impl RmsProp {
    /// Learning rate `lr`, α 0.99, eps 1e-8, no weight decay, no momentum (PyTorch's defaults).
    pub fn new(lr: f32) -> Self {
        RmsProp {
            lr,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            state: StateTable::new(&["square_avg", "momentum_buffer"]),
        }
    }

    /// Smoothing constant of the squared-gradient average (default 0.99).
    pub fn alpha(mut self, alpha: f32) -> Self {
        self.alpha = alpha;
        self
    }

    /// Added to `sqrt(v)` in the denominator for stability (default 1e-8).
    pub fn eps(mut self, eps: f32) -> Self {
        self.eps = eps;
        self
    }

    /// L2 penalty added to the gradient (`g + wd·p`, default 0).
    pub fn weight_decay(mut self, weight_decay: f32) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Momentum factor μ of the update buffer (default 0: none).
    pub fn momentum(mut self, momentum: f32) -> Self {
        self.momentum = momentum;
        self
    }
}

impl Optimizer for RmsProp {
    fn name(&self) -> &'static str {
        "RMSprop"
    }

    fn step(&mut self, params: &[(String, Param)], grads: &Gradients) -> Result<()> {
        check("RMSprop", "lr", self.lr, self.lr >= 0.0)?;
        check("RMSprop", "alpha", self.alpha, (0.0..=1.0).contains(&self.alpha))?;
        check("RMSprop", "eps", self.eps, self.eps >= 0.0)?;
        check("RMSprop", "weight_decay", self.weight_decay, self.weight_decay >= 0.0)?;
        check("RMSprop", "momentum", self.momentum, self.momentum >= 0.0)?;
        let (lr, alpha, eps, weight_decay, momentum) =
            (self.lr, self.alpha, self.eps, self.weight_decay, self.momentum);
        self.state.step(params, grads, |_, _, _| OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum })
    }

    lr_and_state_methods!();
}
