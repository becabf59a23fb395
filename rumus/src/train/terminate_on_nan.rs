//! End training with an error when the loss becomes NaN or infinite (Keras' `TerminateOnNaN`),
//! putting back the last good weights.

use super::finite::weights_finite;
use super::{Callback, Logs, TrainContext, WeightSnapshot};
use crate::{Error, Result};

/// Checks the training loss and the weights every time the loss is read (every `progress_every`
/// steps with a progress bar, else at the epoch's end). On NaN or ±inf in either it restores the weights as they were at the
/// start of the current epoch (a device-side copy taken then) and ends `fit` with
/// [`Error::Training`]. Optimizer state is not restored.
#[derive(Default)]
pub struct TerminateOnNaN {
    snapshot: Option<WeightSnapshot>,
}

impl TerminateOnNaN {
    /// The callback (it has no settings).
    pub fn new() -> Self {
        TerminateOnNaN::default()
    }
}

impl Callback for TerminateOnNaN {
    fn on_epoch_begin(&mut self, _epoch: usize, ctx: &mut TrainContext<'_>) -> Result<()> {
        self.snapshot = Some(WeightSnapshot::take(ctx.model())?);
        Ok(())
    }

    fn on_metrics(&mut self, epoch: usize, step: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
        // The loss was computed before the last step's update; the weights show what it did.
        let what = match logs.get("loss").filter(|l| !l.is_finite()) {
            Some(loss) => format!("the loss became {loss}"),
            None if !weights_finite(ctx.model())? => "the weights became NaN or infinite".to_string(),
            None => return Ok(()),
        };
        if let Some(snapshot) = &self.snapshot {
            snapshot.restore()?;
        }
        Err(Error::Training(format!(
            "TerminateOnNaN: {what} in epoch {} by step {step}; the weights were restored to their values at the \
             start of that epoch",
            epoch + 1
        )))
    }
}
