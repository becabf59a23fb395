//! The `Callback` trait and what a callback can see and change during `fit`.

use crate::nn::Module;
use crate::optim::Optimizer;
use crate::Result;

use super::{History, Logs};

/// What a callback may look at and change while training runs.
pub struct TrainContext<'a> {
    pub(crate) model: &'a dyn Module,
    pub(crate) optimizer: &'a mut dyn Optimizer,
    pub(crate) history: &'a History,
    pub(crate) stop: &'a mut Option<String>,
    pub(crate) epochs: usize,
}

impl TrainContext<'_> {
    /// The model being trained (parameters can be saved, copied or assigned through it).
    pub fn model(&self) -> &dyn Module {
        self.model
    }

    /// The optimizer's current learning rate.
    pub fn learning_rate(&self) -> f32 {
        self.optimizer.learning_rate()
    }

    /// Changes the learning rate from the next step on (a `Fit::schedule` overrides it per step).
    pub fn set_learning_rate(&mut self, lr: f32) {
        self.optimizer.set_learning_rate(lr);
    }

    /// Ends training after the current epoch (Keras' `model.stop_training = True`).
    pub fn stop_training(&mut self, reason: impl Into<String>) {
        *self.stop = Some(reason.into());
    }

    /// Whether a callback asked to stop.
    pub fn stopping(&self) -> bool {
        self.stop.is_some()
    }

    /// The epochs finished so far.
    pub fn history(&self) -> &History {
        self.history
    }

    /// The number of epochs `fit` was asked for.
    pub fn epochs(&self) -> usize {
        self.epochs
    }
}

/// Hooks into `fit`, with Keras' semantics. Epochs are 0-based here (file name templates of
/// [`ModelCheckpoint`](super::ModelCheckpoint) show them 1-based, as Keras does). Returning an
/// error ends `fit` with that error.
pub trait Callback: Send {
    /// Before the first epoch. Returning an error ends `fit` before any step.
    fn on_train_begin(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }

    /// At the start of each epoch (`epoch` is 0-based).
    fn on_epoch_begin(&mut self, _epoch: usize, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }

    /// Called whenever the running training metrics were read from the device: every
    /// `progress_every` steps in progress-bar mode, and at the end of every epoch. `step` counts
    /// the epoch's optimizer steps so far (with gradient accumulation, one per
    /// `accumulate_grad_batches` batches). `logs` hold the epoch's means so far.
    fn on_metrics(&mut self, _epoch: usize, _step: usize, _logs: &Logs, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }

    /// After the epoch's training and validation; `logs` hold `loss`, `accuracy`, `val_*`, `lr`.
    fn on_epoch_end(&mut self, _epoch: usize, _logs: &Logs, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }

    /// After the last epoch (also when a callback stopped training early), before `fit` returns.
    fn on_train_end(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// Whether a monitored metric improves by going down or up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// `Max` for accuracy-like metrics (names containing `acc`), `Min` otherwise.
    #[default]
    Auto,
    /// Smaller is better (losses).
    Min,
    /// Larger is better (accuracies).
    Max,
}

impl Mode {
    /// True when larger is better for `monitor`.
    pub(crate) fn maximise(self, monitor: &str) -> bool {
        match self {
            Mode::Auto => monitor.contains("acc"),
            Mode::Min => false,
            Mode::Max => true,
        }
    }
}
