//! The `Callback` trait and what a callback can see and change during `fit`.

use crate::nn::Module;
use crate::optim::Optimizer;
use crate::{Error, Result};

use super::{History, Logs};

/// What a callback may look at and change while training runs.
pub struct TrainContext<'a> {
    pub(crate) model: &'a dyn Module,
    pub(crate) optimizer: &'a mut dyn Optimizer,
    pub(crate) history: &'a History,
    pub(crate) stop: &'a mut Option<String>,
    pub(crate) epochs: usize,
    pub(crate) metric_names: &'a [String],
}

impl TrainContext<'_> {
    /// The model being trained (parameters can be saved, copied or assigned through it).
    pub fn model(&self) -> &dyn Module {
        self.model
    }

    /// The optimizer, to read its state: `rumus::io::save_optimizer(ctx.optimizer(), path)` in
    /// a callback saves what resuming needs besides the weights
    /// ([`load_optimizer`](crate::io::load_optimizer) before the next `fit`).
    pub fn optimizer(&self) -> &dyn Optimizer {
        &*self.optimizer
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

    /// The names every epoch's logs (of `on_epoch_end`) will hold: `loss`, the chosen metrics,
    /// their `val_` forms when there is validation data, and `lr`.
    pub fn metric_names(&self) -> &[String] {
        self.metric_names
    }

    /// An error for callback `who` unless `name` is one of [`metric_names`](Self::metric_names),
    /// listing them (for a callback's `monitor`, checked in [`Callback::check`]).
    pub fn require_metric(&self, who: &'static str, name: &str) -> Result<()> {
        if self.metric_names.iter().any(|n| n == name) {
            return Ok(());
        }
        let hint = if name.starts_with("val_") && !self.metric_names.iter().any(|n| n.starts_with("val_")) {
            " (val_ metrics need validation data or validation_split)"
        } else {
            ""
        };
        Err(Error::invalid(
            who,
            format!("monitors `{name}`, which this fit does not log; it logs {}{hint}", self.metric_names.join(", ")),
        ))
    }
}

/// Hooks into `fit`, with Keras' semantics. Epochs are 0-based here (file name templates of
/// [`ModelCheckpoint`](super::ModelCheckpoint) show them 1-based, as Keras does). Returning an
/// error ends `fit` with that error.
pub trait Callback: Send {
    /// When `fit` starts, before any callback's `on_train_begin`: checks the callback's settings
    /// against this run (e.g. that a monitored metric is among
    /// [`metric_names`](TrainContext::metric_names)). An error ends `fit` before any step and
    /// before any callback wrote a file.
    fn check(&self, _ctx: &TrainContext<'_>) -> Result<()> {
        Ok(())
    }

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

    /// After the epoch's training and validation; `logs` hold `loss`, `accuracy`, `val_*`, `lr`
    /// (and `loss_scale` with a [`Fit::loss_scaler`](super::Fit::loss_scaler)).
    fn on_epoch_end(&mut self, _epoch: usize, _logs: &Logs, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }

    /// After the last epoch (also when a callback stopped training early), before `fit` returns.
    fn on_train_end(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// `Callback` for a pointer type by forwarding every hook to the callback it points to.
macro_rules! forward_callback {
    ($(#[$doc:meta])* $pointer:ty) => {
        $(#[$doc])*
        impl<C: Callback + ?Sized> Callback for $pointer {
            fn check(&self, ctx: &TrainContext<'_>) -> Result<()> {
                (**self).check(ctx)
            }

            fn on_train_begin(&mut self, ctx: &mut TrainContext<'_>) -> Result<()> {
                (**self).on_train_begin(ctx)
            }

            fn on_epoch_begin(&mut self, epoch: usize, ctx: &mut TrainContext<'_>) -> Result<()> {
                (**self).on_epoch_begin(epoch, ctx)
            }

            fn on_metrics(&mut self, epoch: usize, step: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
                (**self).on_metrics(epoch, step, logs, ctx)
            }

            fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
                (**self).on_epoch_end(epoch, logs, ctx)
            }

            fn on_train_end(&mut self, ctx: &mut TrainContext<'_>) -> Result<()> {
                (**self).on_train_end(ctx)
            }
        }
    };
}

forward_callback!(
    /// A callback lent to `fit` (`.callback(&mut stopper)`), so it can be read afterwards.
    &mut C
);
forward_callback!(
    /// A boxed callback (e.g. one of a `Vec<Box<dyn Callback>>` chosen at run time).
    Box<C>
);

/// Whether a monitored metric improves by going down or up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// `Max` for accuracy-like metrics (names containing `acc`) and for `precision`, `recall`
    /// and `f1` (with or without `val_`), `Min` otherwise (losses, `mae`).
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
            Mode::Auto => {
                let base = monitor.strip_prefix("val_").unwrap_or(monitor);
                base.contains("acc") || matches!(base, "precision" | "recall" | "f1")
            }
            Mode::Min => false,
            Mode::Max => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Mode;

    #[test]
    fn auto_maximises_accuracies_precision_recall_and_f1_and_minimises_the_rest() {
        for name in ["accuracy", "val_top5_accuracy", "precision", "val_recall", "f1", "val_f1"] {
            assert!(Mode::Auto.maximise(name), "{name}");
        }
        for name in ["loss", "val_loss", "mae", "val_mae", "lr"] {
            assert!(!Mode::Auto.maximise(name), "{name}");
        }
        assert!(Mode::Max.maximise("loss") && !Mode::Min.maximise("f1"));
    }
}
