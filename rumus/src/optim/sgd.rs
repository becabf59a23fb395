//! Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay
//! (`torch.optim.SGD`).

use super::state::{check, lr_and_state_methods, StateTable};
use super::{Optimizer, OptimizerState};
use crate::nn::Param;
use crate::ops::OptimizerStep;
use crate::{Error, Gradients, Result};

/// `torch.optim.SGD`: `g = grad + wd·p`; with momentum `buf = μ·buf + (1-dampening)·g`
/// (`buf = g` on the first step), then `g = g + μ·buf` (Nesterov) or `g = buf`; `p -= lr·g`.
#[derive(Debug)]
pub struct Sgd {
    lr: f32,
    momentum: f32,
    dampening: f32,
    weight_decay: f32,
    nesterov: bool,
    state: StateTable,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    ///
    /// ```
    /// use rumus::nn::{named_parameters, Linear, Module};
    /// use rumus::optim::{Optimizer, Sgd};
    /// use rumus::{Device, RawTensor};
    ///
    /// let device = Device::cpu();
    /// let layer = Linear::new(&device, 2, 1, false, 0)?;
    /// let before = layer.weight.tensor().to_vec()?;
    /// let x = RawTensor::from_vec(vec![1.0, 2.0], &[1, 2], &device)?;
    /// let loss = layer.forward_raw(&x)?.sum(&[0, 1], false)?; // d loss / d weight = x
    /// let grads = loss.backward()?;
    /// let mut sgd = Sgd::new(0.1);
    /// sgd.step(&named_parameters(&layer), &grads)?; // in place: weight -= 0.1 · x
    /// let after = layer.weight.tensor().to_vec()?;
    /// assert!((after[0] - (before[0] - 0.1)).abs() < 1e-6);
    /// assert!((after[1] - (before[1] - 0.2)).abs() < 1e-6);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn new(lr: f32) -> Self {
        Sgd {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            state: StateTable::new(&["momentum_buffer"]),
        }
    }

    /// Momentum factor μ (default 0: plain SGD).
    pub fn momentum(mut self, momentum: f32) -> Self {
        self.momentum = momentum;
        self
    }

    /// Dampening of the gradient's share in the momentum buffer (default 0).
    pub fn dampening(mut self, dampening: f32) -> Self {
        self.dampening = dampening;
        self
    }

    /// L2 penalty added to the gradient.
    pub fn weight_decay(mut self, weight_decay: f32) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Nesterov momentum (needs momentum > 0 and dampening 0, as in PyTorch).
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }

    fn validate(&self) -> Result<()> {
        check("SGD", "lr", self.lr, self.lr >= 0.0)?;
        check("SGD", "momentum", self.momentum, self.momentum >= 0.0)?;
        check("SGD", "dampening", self.dampening, true)?;
        check("SGD", "weight_decay", self.weight_decay, self.weight_decay >= 0.0)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::invalid("SGD", "Nesterov momentum requires a momentum and zero dampening"));
        }
        Ok(())
    }
}

impl Optimizer for Sgd {
    fn name(&self) -> &'static str {
        "SGD"
    }

    fn step(&mut self, params: &[(String, Param)], grads: &Gradients) -> Result<()> {
        self.validate()?;
        let (lr, momentum, dampening, weight_decay, nesterov) =
            (self.lr, self.momentum, self.dampening, self.weight_decay, self.nesterov);
        self.state.step(params, grads, |steps, _, _| OptimizerStep::Sgd {
            lr,
            momentum,
            dampening,
            weight_decay,
            nesterov,
            first_step: steps == 1,
        })
    }

    lr_and_state_methods!();
}
