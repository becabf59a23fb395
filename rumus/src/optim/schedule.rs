//! Learning-rate schedules. A schedule maps the position in training to a learning rate; the
//! training loop asks it before every step, so per-epoch schedules (step, exponential, cosine)
//! and per-step ones (warmup, one-cycle) share one interface.

use std::f32::consts::PI;

use crate::{Error, Result};

/// Where training is when a step is about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// 0-based epoch.
    pub epoch: usize,
    /// 0-based step counted over the whole run.
    pub step: usize,
    pub steps_per_epoch: usize,
    /// Steps of the whole run (`epochs · steps_per_epoch`).
    pub total_steps: usize,
}

/// A learning-rate schedule. `base_lr` is the optimizer's learning rate when training started.
pub trait Schedule: Send {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32;
}

impl<F: Fn(f32, Progress) -> f32 + Send> Schedule for F {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        self(base_lr, at)
    }
}

/// `torch.optim.lr_scheduler.StepLR`: multiply by `gamma` every `step_size` epochs.
#[derive(Clone, Copy, Debug)]
pub struct StepLr {
    pub step_size: usize,
    pub gamma: f32,
}

impl StepLr {
    pub fn new(step_size: usize, gamma: f32) -> Result<Self> {
        if step_size == 0 {
            return Err(Error::invalid("StepLr", "step_size must be at least 1 epoch"));
        }
        Ok(StepLr { step_size, gamma })
    }
}

impl Schedule for StepLr {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        base_lr * self.gamma.powi((at.epoch / self.step_size.max(1)) as i32)
    }
}

/// `ExponentialLR`: multiply by `gamma` every epoch.
#[derive(Clone, Copy, Debug)]
pub struct ExponentialLr {
    pub gamma: f32,
}

impl Schedule for ExponentialLr {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        base_lr * self.gamma.powi(at.epoch as i32)
    }
}

/// `CosineAnnealingLR` (closed form, per epoch): from `base_lr` down to `eta_min` over `t_max`
/// epochs, following the cosine's half period.
#[derive(Clone, Copy, Debug)]
pub struct CosineAnnealing {
    pub t_max: usize,
    pub eta_min: f32,
}

impl Schedule for CosineAnnealing {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        let t = at.epoch as f32 / self.t_max.max(1) as f32;
        self.eta_min + (base_lr - self.eta_min) * (1.0 + (PI * t).cos()) / 2.0
    }
}

/// Linear warmup over the first `warmup_steps` steps, from `start_factor · lr` to `lr`, where
/// `lr` comes from `then` (or is the base rate). Per step.
pub struct LinearWarmup {
    pub warmup_steps: usize,
    pub start_factor: f32,
    pub then: Option<Box<dyn Schedule>>,
}

impl LinearWarmup {
    /// Warmup from `lr / warmup_steps`-ish (start factor 1/warmup_steps) to the base rate.
    pub fn new(warmup_steps: usize) -> Self {
        LinearWarmup { warmup_steps, start_factor: 1.0 / warmup_steps.max(1) as f32, then: None }
    }

    pub fn start_factor(mut self, start_factor: f32) -> Self {
        self.start_factor = start_factor;
        self
    }

    /// The schedule that takes over (and is scaled during warmup).
    pub fn then(mut self, schedule: impl Schedule + 'static) -> Self {
        self.then = Some(Box::new(schedule));
        self
    }
}

impl Schedule for LinearWarmup {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        let lr = match &self.then {
            Some(s) => s.learning_rate(base_lr, at),
            None => base_lr,
        };
        if at.step >= self.warmup_steps {
            return lr;
        }
        let t = at.step as f32 / self.warmup_steps as f32;
        lr * (self.start_factor + (1.0 - self.start_factor) * t)
    }
}

/// `OneCycleLR` with cosine annealing (per step): from `max_lr / div_factor` up to `max_lr`
/// over the first `pct_start` of the run, then down to `initial / final_div_factor`.
/// Ignores the optimizer's base rate, as PyTorch does.
#[derive(Clone, Copy, Debug)]
pub struct OneCycle {
    pub max_lr: f32,
    pub pct_start: f32,
    pub div_factor: f32,
    pub final_div_factor: f32,
}

impl OneCycle {
    /// PyTorch's defaults: `pct_start` 0.3, `div_factor` 25, `final_div_factor` 1e4.
    pub fn new(max_lr: f32) -> Self {
        OneCycle { max_lr, pct_start: 0.3, div_factor: 25.0, final_div_factor: 1e4 }
    }

    pub fn pct_start(mut self, pct_start: f32) -> Self {
        self.pct_start = pct_start;
        self
    }
}

fn anneal_cos(start: f32, end: f32, pct: f32) -> f32 {
    end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0)
}

impl Schedule for OneCycle {
    fn learning_rate(&self, _base_lr: f32, at: Progress) -> f32 {
        let initial = self.max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let step = at.step as f32;
        let up_end = self.pct_start * at.total_steps as f32 - 1.0;
        let down_end = at.total_steps as f32 - 1.0;
        if step <= up_end {
            anneal_cos(initial, self.max_lr, if up_end > 0.0 { step / up_end } else { 1.0 })
        } else {
            let span = down_end - up_end;
            anneal_cos(self.max_lr, min, if span > 0.0 { ((step - up_end) / span).min(1.0) } else { 1.0 })
        }
    }
}

/// Linear warmup then cosine decay, per step: nanoGPT's `get_lr`. During the first
/// `warmup_steps` steps the rate is `base_lr · (step + 1) / (warmup_steps + 1)`; from there it
/// follows a cosine half period down to `min_lr` at step `decay_steps`, and stays at `min_lr`.
#[derive(Clone, Copy, Debug)]
pub struct WarmupCosine {
    warmup_steps: usize,
    decay_steps: usize,
    min_lr: f32,
}

impl WarmupCosine {
    /// `decay_steps` must exceed `warmup_steps`; `min_lr` must be finite and non-negative.
    pub fn new(warmup_steps: usize, decay_steps: usize, min_lr: f32) -> Result<Self> {
        if decay_steps <= warmup_steps {
            return Err(Error::invalid(
                "WarmupCosine",
                format!("decay_steps {decay_steps} must exceed warmup_steps {warmup_steps}"),
            ));
        }
        if !(min_lr.is_finite() && min_lr >= 0.0) {
            return Err(Error::invalid("WarmupCosine", format!("min_lr {min_lr} must be finite and >= 0")));
        }
        Ok(WarmupCosine { warmup_steps, decay_steps, min_lr })
    }
}

impl Schedule for WarmupCosine {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        if at.step < self.warmup_steps {
            return base_lr * (at.step + 1) as f32 / (self.warmup_steps + 1) as f32;
        }
        if at.step > self.decay_steps {
            return self.min_lr;
        }
        let ratio = (at.step - self.warmup_steps) as f64 / (self.decay_steps - self.warmup_steps) as f64;
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        (self.min_lr as f64 + coeff * (base_lr - self.min_lr) as f64) as f32
    }
}

#[cfg(test)]
mod warmup_cosine_tests {
    use super::*;

    fn at(step: usize) -> Progress {
        Progress { epoch: 0, step, steps_per_epoch: 10_000, total_steps: 10_000 }
    }

    #[test]
    fn follows_nanogpt_get_lr() {
        let s = WarmupCosine::new(100, 5000, 1e-4).unwrap();
        // Values of nanoGPT's get_lr(it) with learning_rate 1e-3.
        assert!((s.learning_rate(1e-3, at(0)) - 1e-3 / 101.0).abs() < 1e-9);
        assert!((s.learning_rate(1e-3, at(99)) - 1e-3 * 100.0 / 101.0).abs() < 1e-9);
        assert!((s.learning_rate(1e-3, at(100)) - 1e-3).abs() < 1e-9);
        assert!((s.learning_rate(1e-3, at(2550)) - 5.5e-4).abs() < 1e-8);
        assert!((s.learning_rate(1e-3, at(5000)) - 1e-4).abs() < 1e-9);
        assert_eq!(s.learning_rate(1e-3, at(9000)), 1e-4);
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(WarmupCosine::new(100, 100, 1e-4).is_err());
        assert!(WarmupCosine::new(0, 10, f32::NAN).is_err());
        assert!(WarmupCosine::new(0, 10, -1.0).is_err());
    }
}
