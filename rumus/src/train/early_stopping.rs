//! Stop training when a monitored metric has stopped improving (Keras' `EarlyStopping`).

use super::{Callback, Logs, Mode, TrainContext, WeightSnapshot};
use crate::Result;

/// Stops `fit` once `monitor` has not improved by more than `min_delta` for `patience` epochs.
/// With `restore_best_weights`, the weights of the best epoch are put back when training ends
/// (kept meanwhile as a copy on the device).
pub struct EarlyStopping {
    monitor: String,
    min_delta: f32,
    patience: usize,
    mode: Mode,
    baseline: Option<f32>,
    restore_best_weights: bool,
    start_from_epoch: usize,
    wait: usize,
    best: Option<f32>,
    best_epoch: Option<usize>,
    best_weights: Option<WeightSnapshot>,
    stopped_epoch: Option<usize>,
}

impl EarlyStopping {
    /// Monitors `monitor` (e.g. `"val_loss"`) with patience 0 and no minimum delta.
    pub fn new(monitor: impl Into<String>) -> Self {
        EarlyStopping {
            monitor: monitor.into(),
            min_delta: 0.0,
            patience: 0,
            mode: Mode::Auto,
            baseline: None,
            restore_best_weights: false,
            start_from_epoch: 0,
            wait: 0,
            best: None,
            best_epoch: None,
            best_weights: None,
            stopped_epoch: None,
        }
    }

    /// Epochs without improvement to wait before stopping.
    pub fn patience(mut self, patience: usize) -> Self {
        self.patience = patience;
        self
    }

    /// The smallest change that counts as an improvement.
    pub fn min_delta(mut self, min_delta: f32) -> Self {
        self.min_delta = min_delta.abs();
        self
    }

    /// Whether `monitor` improves downwards or upwards (default [`Mode::Auto`]: by its name).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Training only counts as improving once the metric beats `baseline`.
    pub fn baseline(mut self, baseline: f32) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// Puts back the weights of the best epoch when training stops (default off).
    pub fn restore_best_weights(mut self, restore: bool) -> Self {
        self.restore_best_weights = restore;
        self
    }

    /// Epochs of warm-up before monitoring starts.
    pub fn start_from_epoch(mut self, epoch: usize) -> Self {
        self.start_from_epoch = epoch;
        self
    }

    /// The epoch (0-based) at which training was stopped, if it was.
    pub fn stopped_epoch(&self) -> Option<usize> {
        self.stopped_epoch
    }

    /// The best epoch (0-based) seen.
    pub fn best_epoch(&self) -> Option<usize> {
        self.best_epoch
    }

    fn improves(&self, value: f32, reference: Option<f32>) -> bool {
        let Some(reference) = reference else {
            return true;
        };
        if self.mode.maximise(&self.monitor) {
            value - self.min_delta > reference
        } else {
            value + self.min_delta < reference
        }
    }
}

impl Callback for EarlyStopping {
    fn check(&self, ctx: &TrainContext<'_>) -> Result<()> {
        ctx.require_metric("EarlyStopping", &self.monitor)
    }

    fn on_train_begin(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        self.wait = 0;
        self.best = None;
        self.best_epoch = None;
        self.best_weights = None;
        self.stopped_epoch = None;
        Ok(())
    }

    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
        let current = logs.require("EarlyStopping", &self.monitor)?;
        if epoch < self.start_from_epoch {
            return Ok(());
        }
        if self.restore_best_weights && self.best_weights.is_none() {
            self.best_weights = Some(WeightSnapshot::take(ctx.model())?);
        }
        self.wait += 1;
        if self.improves(current, self.best) {
            self.best = Some(current);
            self.best_epoch = Some(epoch);
            if self.restore_best_weights {
                self.best_weights = Some(WeightSnapshot::take(ctx.model())?);
            }
            if self.baseline.is_none() || self.improves(current, self.baseline) {
                self.wait = 0;
            }
            return Ok(());
        }
        if self.wait >= self.patience && epoch > 0 {
            self.stopped_epoch = Some(epoch);
            ctx.stop_training(format!(
                "EarlyStopping: {} did not improve for {} epochs (best {} at epoch {})",
                self.monitor,
                self.wait,
                super::significant::significant(self.best.unwrap_or(f32::NAN)),
                self.best_epoch.map_or(0, |e| e + 1)
            ));
        }
        Ok(())
    }

    fn on_train_end(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        if self.restore_best_weights {
            if let Some(best) = &self.best_weights {
                best.restore()?;
            }
        }
        Ok(())
    }
}
