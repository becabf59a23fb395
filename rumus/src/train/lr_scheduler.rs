//! Set the learning rate at every epoch's start from a function (Keras' `LearningRateScheduler`).

use super::{Callback, TrainContext};
use crate::Result;

/// Calls `schedule(epoch, current_lr)` (0-based epoch) at each epoch's start and uses its
/// result as the learning rate. For per-step schedules use `Fit::schedule`.
pub struct LearningRateScheduler<F: FnMut(usize, f32) -> f32 + Send> {
    schedule: F,
}

impl<F: FnMut(usize, f32) -> f32 + Send> LearningRateScheduler<F> {
    /// Calls `schedule(epoch, current_lr)` at each epoch's start; a negative or non-finite result
    /// ends `fit` with [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn new(schedule: F) -> Self {
        LearningRateScheduler { schedule }
    }
}

impl<F: FnMut(usize, f32) -> f32 + Send> Callback for LearningRateScheduler<F> {
    fn on_epoch_begin(&mut self, epoch: usize, ctx: &mut TrainContext<'_>) -> Result<()> {
        let lr = (self.schedule)(epoch, ctx.learning_rate());
        if !lr.is_finite() || lr < 0.0 {
            return Err(crate::Error::invalid("LearningRateScheduler", format!("epoch {epoch}: learning rate {lr}")));
        }
        ctx.set_learning_rate(lr);
        Ok(())
    }
}
