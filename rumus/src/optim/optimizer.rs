//! The `Optimizer` trait.

use super::OptimizerState;
use crate::nn::Param;
use crate::{Gradients, Result};

/// Updates parameters from their gradients. State is keyed by parameter name (the names of
/// [`Module::visit_params`](crate::nn::Module::visit_params)), so it can be saved and resumed.
pub trait Optimizer: Send {
    /// PyTorch's class name, e.g. `"Adam"`; stored in saved state.
    fn name(&self) -> &'static str;

    /// One update of every trainable parameter in `params` that has a gradient in `grads`.
    /// Parameters without a gradient (unused in this step) and buffers are left alone, and a
    /// tensor listed under several names (a tied weight) is updated once, under its first.
    fn step(&mut self, params: &[(String, Param)], grads: &Gradients) -> Result<()>;

    /// The learning rate the next step uses.
    fn learning_rate(&self) -> f32;

    /// Sets the learning rate (schedules and callbacks call this between steps).
    fn set_learning_rate(&mut self, lr: f32);

    /// A host copy of the state (step counts and buffers) for checkpoints.
    fn state(&self) -> Result<OptimizerState>;

    /// Restores state saved by [`Optimizer::state`]. Buffers move to each parameter's device;
    /// a buffer for an unknown parameter or of the wrong shape is an error.
    fn load_state(&mut self, state: &OptimizerState, params: &[(String, Param)]) -> Result<()>;
}
