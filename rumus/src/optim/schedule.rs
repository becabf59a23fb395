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
    /// Optimizer steps per epoch.
    pub steps_per_epoch: usize,
    /// Steps of the whole run (`epochs · steps_per_epoch`).
    pub total_steps: usize,
}

/// A learning-rate schedule. `base_lr` is the optimizer's learning rate when training started.
pub trait Schedule: Send {
    /// The learning rate for the step about to run at `at`.
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
    /// Epochs between two decays (at least 1).
    pub step_size: usize,
    /// Factor applied at each decay (e.g. 0.1).
    pub gamma: f32,
}

impl StepLr {
    /// Decays by `gamma` every `step_size` epochs; `step_size` 0 is
    /// [`Error::InvalidArgument`].
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
    /// Factor applied after each epoch (e.g. 0.95).
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
    /// Epochs of the half period, after which the rate is `eta_min`.
    pub t_max: usize,
    /// The lowest rate, reached at epoch `t_max`.
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
    /// Steps of the warmup; from then on the rate is `then`'s (or the base rate).
    pub warmup_steps: usize,
    /// Fraction of the rate at step 0, growing linearly to 1 at `warmup_steps`.
    pub start_factor: f32,
    /// The schedule after (and under) the warmup; `None` for the constant base rate.
    pub then: Option<Box<dyn Schedule>>,
}

impl LinearWarmup {
    /// Warmup from `lr / warmup_steps`-ish (start factor 1/warmup_steps) to the base rate.
    pub fn new(warmup_steps: usize) -> Self {
        LinearWarmup { warmup_steps, start_factor: 1.0 / warmup_steps.max(1) as f32, then: None }
    }

    /// Sets the fraction of the rate at step 0 (default `1 / warmup_steps`).
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
    /// The peak learning rate, reached at `pct_start` of the run.
    pub max_lr: f32,
    /// Fraction of the run spent rising (default 0.3).
    pub pct_start: f32,
    /// The starting rate is `max_lr / div_factor` (default 25).
    pub div_factor: f32,
    /// The final rate is the starting rate divided by this (default 1e4).
    pub final_div_factor: f32,
}

impl OneCycle {
    /// PyTorch's defaults: `pct_start` 0.3, `div_factor` 25, `final_div_factor` 1e4.
    pub fn new(max_lr: f32) -> Self {
        OneCycle { max_lr, pct_start: 0.3, div_factor: 25.0, final_div_factor: 1e4 }
    }

    /// Sets the fraction of the run spent rising to `max_lr` (default 0.3).
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

/// nanoGPT's `get_lr` (per step): a linear warmup to the base rate over `warmup_steps` steps
/// (`lr · (step + 1) / (warmup_steps + 1)`), then a cosine decay to `min_lr` reached at step
/// `decay_steps` (default: the run's last step, `total_steps`), and `min_lr` after that.
#[derive(Clone, Copy, Debug)]
pub struct WarmupCosine {
    /// Steps of the linear warmup.
    pub warmup_steps: usize,
    /// The rate at the end of the decay and after it.
    pub min_lr: f32,
    /// The step at which the decay reaches `min_lr`; `None` for the run's `total_steps`.
    pub decay_steps: Option<usize>,
}

impl WarmupCosine {
    /// Warmup over `warmup_steps`, then cosine decay to `min_lr` at the end of the run.
    pub fn new(warmup_steps: usize, min_lr: f32) -> Self {
        WarmupCosine { warmup_steps, min_lr, decay_steps: None }
    }

    /// Reach `min_lr` at step `steps` (nanoGPT's `lr_decay_iters`) instead of the run's end.
    pub fn decay_steps(mut self, steps: usize) -> Self {
        self.decay_steps = Some(steps);
        self
    }
}

impl Schedule for WarmupCosine {
    fn learning_rate(&self, base_lr: f32, at: Progress) -> f32 {
        let (step, warmup) = (at.step as f64, self.warmup_steps as f64);
        if at.step < self.warmup_steps {
            return (base_lr as f64 * (step + 1.0) / (warmup + 1.0)) as f32;
        }
        let decay_end = self.decay_steps.unwrap_or(at.total_steps);
        if at.step > decay_end || decay_end <= self.warmup_steps {
            return self.min_lr;
        }
        let ratio = (step - warmup) / (decay_end as f64 - warmup);
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        (self.min_lr as f64 + coeff * (base_lr as f64 - self.min_lr as f64)) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::{Progress, Schedule, WarmupCosine};

    fn at(step: usize, total_steps: usize) -> Progress {
        Progress { epoch: 0, step, steps_per_epoch: total_steps, total_steps }
    }

    /// nanoGPT's `get_lr` with learning_rate 1e-3, warmup_iters 100, lr_decay_iters 5000,
    /// min_lr 1e-4 (`shakespeare_char`), by hand.
    #[test]
    fn warmup_cosine_is_nanogpts_get_lr() {
        let s = WarmupCosine::new(100, 1e-4).decay_steps(5000);
        let close = |step: usize, want: f64| {
            let got = s.learning_rate(1e-3, at(step, 10_000)) as f64;
            assert!((got - want).abs() < 1e-9, "step {step}: {got} vs {want}");
        };
        close(0, 1e-3 / 101.0);
        close(49, 1e-3 * 50.0 / 101.0);
        close(99, 1e-3 * 100.0 / 101.0);
        close(100, 1e-3);
        close(2550, 1e-4 + 0.5 * 9e-4);
        close(5000, 1e-4);
        close(7000, 1e-4);
        // Without decay_steps the decay ends with the run.
        let run = WarmupCosine::new(10, 0.0);
        assert!((run.learning_rate(1.0, at(55, 100)) - 0.5).abs() < 1e-6);
        assert_eq!(run.learning_rate(1.0, at(100, 100)), 0.0);
        assert_eq!(WarmupCosine::new(10, 0.25).learning_rate(1.0, at(10, 10)), 0.25);
    }
}
