//! Lower the learning rate when a monitored metric stops improving (Keras' `ReduceLROnPlateau`,
//! PyTorch's `ReduceLROnPlateau`).

use super::{Callback, Logs, Mode, TrainContext};
use crate::{Error, Result};

const OP: &str = "ReduceLROnPlateau";

/// Multiplies the learning rate by `factor` once `monitor` has not improved by more than
/// `min_delta` for `patience` epochs, never below `min_lr`; after a reduction it waits
/// `cooldown` epochs before counting again. Keras' defaults: factor 0.1, patience 10,
/// min_delta 1e-4, no cooldown, min_lr 0. Its settings and `monitor` (one of the metrics the
/// run logs) are checked when `fit` starts.
///
/// The new rate holds from the next step on; a per-step [`Fit::schedule`](super::Fit) sets the
/// rate at every step and so overrides it (use one or the other).
///
/// ```
/// use rumus::train::ReduceLROnPlateau;
/// let plateau = ReduceLROnPlateau::new("val_loss").factor(0.5).patience(2).min_lr(1e-5);
/// assert_eq!(plateau.reductions(), 0);
/// ```
pub struct ReduceLROnPlateau {
    monitor: String,
    factor: f32,
    patience: usize,
    min_delta: f32,
    cooldown: usize,
    min_lr: f32,
    mode: Mode,
    best: Option<f32>,
    wait: usize,
    cooldown_left: usize,
    reductions: usize,
}

impl ReduceLROnPlateau {
    /// Monitors `monitor` (e.g. `"val_loss"`, or `"loss"` without validation data).
    pub fn new(monitor: impl Into<String>) -> Self {
        ReduceLROnPlateau {
            monitor: monitor.into(),
            factor: 0.1,
            patience: 10,
            min_delta: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            mode: Mode::Auto,
            best: None,
            wait: 0,
            cooldown_left: 0,
            reductions: 0,
        }
    }

    /// What the learning rate is multiplied by at each reduction; in (0, 1), checked when `fit`
    /// starts.
    pub fn factor(mut self, factor: f32) -> Self {
        self.factor = factor;
        self
    }

    /// Epochs without improvement before a reduction.
    pub fn patience(mut self, patience: usize) -> Self {
        self.patience = patience;
        self
    }

    /// The smallest change that counts as an improvement (absolute).
    pub fn min_delta(mut self, min_delta: f32) -> Self {
        self.min_delta = min_delta.abs();
        self
    }

    /// Epochs after a reduction during which the metric is not watched.
    pub fn cooldown(mut self, cooldown: usize) -> Self {
        self.cooldown = cooldown;
        self
    }

    /// The learning rate is never reduced below this; finite and ≥ 0, checked when `fit` starts.
    pub fn min_lr(mut self, min_lr: f32) -> Self {
        self.min_lr = min_lr;
        self
    }

    /// Whether `monitor` improves downwards or upwards (default [`Mode::Auto`]: by its name).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// How many times the learning rate was reduced in the last `fit`.
    pub fn reductions(&self) -> usize {
        self.reductions
    }

    fn improves(&self, value: f32) -> bool {
        let Some(best) = self.best else {
            return true;
        };
        if self.mode.maximise(&self.monitor) {
            value - self.min_delta > best
        } else {
            value + self.min_delta < best
        }
    }

    /// Lowers the rate by `factor`, clamped at `min_lr`; false when it is already there.
    fn reduce(&mut self, ctx: &mut TrainContext<'_>) -> bool {
        let old = ctx.learning_rate();
        if old <= self.min_lr {
            return false;
        }
        ctx.set_learning_rate((old * self.factor).max(self.min_lr));
        self.reductions += 1;
        true
    }
}

impl Callback for ReduceLROnPlateau {
    fn check(&self, ctx: &TrainContext<'_>) -> Result<()> {
        ctx.require_metric(OP, &self.monitor)?;
        if !(self.factor > 0.0 && self.factor < 1.0) {
            return Err(Error::invalid(OP, format!("factor {} must be in (0, 1)", self.factor)));
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0) {
            return Err(Error::invalid(OP, format!("min_lr {} must be finite and at least 0", self.min_lr)));
        }
        if !self.min_delta.is_finite() {
            return Err(Error::invalid(OP, format!("min_delta {} must be finite", self.min_delta)));
        }
        Ok(())
    }

    fn on_train_begin(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        self.best = None;
        self.wait = 0;
        self.cooldown_left = 0;
        self.reductions = 0;
        Ok(())
    }

    fn on_epoch_end(&mut self, _epoch: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
        let current = logs.require(OP, &self.monitor)?;
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            self.wait = 0;
        }
        if self.improves(current) {
            self.best = Some(current);
            self.wait = 0;
        } else if self.cooldown_left == 0 {
            self.wait += 1;
            if self.wait >= self.patience && self.reduce(ctx) {
                self.cooldown_left = self.cooldown;
                self.wait = 0;
            }
        }
        Ok(())
    }
}
