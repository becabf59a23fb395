//! `Fit`: the settings of one `fit` call, built Keras style.
//!
//! Validation data is borrowed: `.validation(&test)` turns a `Fit` into a `Fit<ValidationData<'_, D>>`
//! holding `&D`, so the data outlives the call without being copied, and its sample and target
//! types are checked against the model at compile time like the training data's.

use crate::data::transforms::Augment;
use crate::data::{Dataset, SampleFor, TargetFor};
use crate::optim::{Optimizer, Schedule};
use crate::{Error, Model, Result};

use super::evaluate::{evaluate_dataset, fixed_subset, EvalSettings, Evaluation};
use super::{Callback, Loss};

/// How much `fit` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verbosity {
    /// An `Epoch i/n` header and a live progress line per epoch (Keras' `verbose=1`). Falls back
    /// to one line per epoch when stderr is not a terminal.
    #[default]
    ProgressBar,
    /// One line per epoch (Keras' `verbose=2`).
    OneLinePerEpoch,
    /// Nothing.
    Quiet,
}

/// No validation data.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoValidation;

/// Validation data borrowed for the duration of `fit`.
pub struct ValidationData<'a, D: Dataset>(pub &'a D);

/// Validation data that fits model `M` (its samples and targets match `M`'s input and output).
#[diagnostic::on_unimplemented(
    message = "the validation data `{Self}` does not fit the model `{M}`",
    label = "validation samples and targets must match the model's input and output shapes"
)]
pub trait ValidationFor<M: Model> {
    /// Evaluates `model` on this data (on at most `samples` of them, a fixed subset, when
    /// given), or `None` when there is none.
    #[doc(hidden)]
    fn evaluate_on(&self, model: &M, settings: &EvalSettings, samples: Option<usize>) -> Result<Option<Evaluation>>;

    /// Whether there is validation data.
    #[doc(hidden)]
    fn present(&self) -> bool;
}

impl<M: Model> ValidationFor<M> for NoValidation {
    fn evaluate_on(&self, _: &M, _: &EvalSettings, _: Option<usize>) -> Result<Option<Evaluation>> {
        Ok(None)
    }

    fn present(&self) -> bool {
        false
    }
}

impl<M: Model, D: Dataset> ValidationFor<M> for ValidationData<'_, D>
where
    D::Sample: SampleFor<M::Input>,
    D::Target: TargetFor<M::Output>,
{
    fn evaluate_on(&self, model: &M, settings: &EvalSettings, samples: Option<usize>) -> Result<Option<Evaluation>> {
        let indices = samples.map(|n| fixed_subset((0..self.0.len()).collect(), n));
        evaluate_dataset(model, self.0, indices, settings).map(Some)
    }

    fn present(&self) -> bool {
        true
    }
}

/// Settings of [`fit`](super::fit): `Fit::epochs(10).batch_size(64).optimizer(Adam::new(1e-3))`.
pub struct Fit<V = NoValidation> {
    pub(crate) epochs: usize,
    pub(crate) batch_size: usize,
    pub(crate) validation_batch_size: usize,
    pub(crate) optimizer: Option<Box<dyn Optimizer>>,
    pub(crate) validation: V,
    pub(crate) validation_split: Option<f32>,
    pub(crate) shuffle_seed: Option<u64>,
    pub(crate) drop_last: bool,
    pub(crate) loss: Option<Loss>,
    pub(crate) callbacks: Vec<Box<dyn Callback>>,
    pub(crate) verbosity: Verbosity,
    pub(crate) clip_grad_norm: Option<f32>,
    pub(crate) schedule: Option<Box<dyn Schedule>>,
    pub(crate) top_k: Option<usize>,
    pub(crate) progress_every: usize,
    pub(crate) prefetch: bool,
    pub(crate) steps_per_epoch: Option<usize>,
    pub(crate) accumulate_grad_batches: usize,
    pub(crate) validation_steps: Option<usize>,
    pub(crate) augment: Option<Augment>,
}

impl Fit<NoValidation> {
    /// Train for `epochs` epochs. Defaults: batch size 32, Adam(1e-3), shuffled with seed 0,
    /// the loss that fits the targets, a progress bar, no validation.
    pub fn epochs(epochs: usize) -> Self {
        Fit {
            epochs,
            batch_size: 32,
            validation_batch_size: 256,
            optimizer: None,
            validation: NoValidation,
            validation_split: None,
            shuffle_seed: Some(0),
            drop_last: false,
            loss: None,
            callbacks: Vec::new(),
            verbosity: Verbosity::ProgressBar,
            clip_grad_norm: None,
            schedule: None,
            top_k: None,
            progress_every: 10,
            prefetch: true,
            steps_per_epoch: None,
            accumulate_grad_batches: 1,
            validation_steps: None,
            augment: None,
        }
    }
}

impl<V> Fit<V> {
    /// Samples per training step (default 32); 0 is an error when `fit` starts.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Batch size used for validation (default 256; it does not change the results).
    pub fn validation_batch_size(mut self, batch_size: usize) -> Self {
        self.validation_batch_size = batch_size;
        self
    }

    /// The optimizer (default `Adam::new(1e-3)`).
    pub fn optimizer(mut self, optimizer: impl Optimizer + 'static) -> Self {
        self.optimizer = Some(Box::new(optimizer));
        self
    }

    /// Evaluates on `data` after every epoch (`val_loss`, `val_accuracy`).
    pub fn validation<D: Dataset>(self, data: &D) -> Fit<ValidationData<'_, D>> {
        Fit {
            epochs: self.epochs,
            batch_size: self.batch_size,
            validation_batch_size: self.validation_batch_size,
            optimizer: self.optimizer,
            validation: ValidationData(data),
            validation_split: self.validation_split,
            shuffle_seed: self.shuffle_seed,
            drop_last: self.drop_last,
            loss: self.loss,
            callbacks: self.callbacks,
            verbosity: self.verbosity,
            clip_grad_norm: self.clip_grad_norm,
            schedule: self.schedule,
            top_k: self.top_k,
            progress_every: self.progress_every,
            prefetch: self.prefetch,
            steps_per_epoch: self.steps_per_epoch,
            accumulate_grad_batches: self.accumulate_grad_batches,
            validation_steps: self.validation_steps,
            augment: self.augment,
        }
    }

    /// Holds out the last `fraction` of the training samples (before shuffling, as Keras does)
    /// for validation. Cannot be combined with [`Fit::validation`].
    pub fn validation_split(mut self, fraction: f32) -> Self {
        self.validation_split = Some(fraction);
        self
    }

    /// Seed of the per-epoch shuffle (default 0).
    pub fn shuffle_seed(mut self, seed: u64) -> Self {
        self.shuffle_seed = Some(seed);
        self
    }

    /// Visits samples in dataset order every epoch.
    pub fn no_shuffle(mut self) -> Self {
        self.shuffle_seed = None;
        self
    }

    /// Skips the last, smaller batch of each epoch.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// The loss (default: cross-entropy for class targets, MSE for regression targets).
    pub fn loss(mut self, loss: Loss) -> Self {
        self.loss = Some(loss);
        self
    }

    /// Adds a callback; callbacks run in the order added.
    pub fn callback(mut self, callback: impl Callback + 'static) -> Self {
        self.callbacks.push(Box::new(callback));
        self
    }

    /// What `fit` prints: a progress bar (default), a line per epoch, or nothing.
    pub fn verbose(mut self, verbosity: Verbosity) -> Self {
        self.verbosity = verbosity;
        self
    }

    /// Clips gradients to this global L2 norm before every step (on the device).
    pub fn clip_grad_norm(mut self, max_norm: f32) -> Self {
        self.clip_grad_norm = Some(max_norm);
        self
    }

    /// Sets the learning rate before every step from `schedule` (relative to the optimizer's
    /// initial rate). Overrides rates set by callbacks.
    pub fn schedule(mut self, schedule: impl Schedule + 'static) -> Self {
        self.schedule = Some(Box::new(schedule));
        self
    }

    /// Also reports `top{k}_accuracy` (class targets).
    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }

    /// In progress-bar mode, read the metrics and redraw every `steps` steps (default 10). Each
    /// read is one small device → host transfer.
    pub fn progress_every(mut self, steps: usize) -> Self {
        self.progress_every = steps.max(1);
        self
    }

    /// Augments every training batch with `augment` (images `[n, c, h, w]`; never the
    /// validation or evaluation batches). Its draws depend on its seed, the epoch and the batch.
    pub fn augment(mut self, augment: Augment) -> Self {
        self.augment = Some(augment);
        self
    }

    /// Assemble batches on a background thread (default on).
    pub fn prefetch(mut self, prefetch: bool) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// An epoch is `steps` optimizer steps (Keras' `steps_per_epoch`) instead of one pass over
    /// the training samples. Their batches (`steps · accumulate_grad_batches` of them, all of
    /// `batch_size` samples) are taken in turn from the loader's successive passes, each pass
    /// shuffled anew (unless [`no_shuffle`](Self::no_shuffle)): every epoch sees fresh
    /// samples, a pass may span epochs, and a batch may span the end of one pass and the start
    /// of the next. Schedules see `steps` steps per epoch and `epochs · steps` in all; the
    /// progress bar counts `steps`. 0 is an error.
    pub fn steps_per_epoch(mut self, steps: usize) -> Self {
        self.steps_per_epoch = Some(steps);
        self
    }

    /// Gradient accumulation: each optimizer step sums the gradients of `batches` consecutive
    /// batches (forward and backward on each, every loss scaled by `1/batches`, so the step
    /// uses their mean: with equal batch sizes, the gradient of one batch `batches` times as
    /// large), then clips (if asked) and steps once. Without
    /// [`steps_per_epoch`](Self::steps_per_epoch) an epoch of `b` batches makes
    /// `ceil(b / batches)` optimizer steps, the last one over the remaining batches (scaled by
    /// one over their number). Schedules, `steps_per_epoch`, the progress bar and the `step` of
    /// `on_metrics` count optimizer steps; the training metrics still cover every batch.
    /// Default 1; 0 is an error.
    pub fn accumulate_grad_batches(mut self, batches: usize) -> Self {
        self.accumulate_grad_batches = batches;
        self
    }

    /// Validates on at most `steps` batches of [`validation_batch_size`](Self::validation_batch_size)
    /// samples (Keras' `validation_steps`): a fixed random subset of the validation samples
    /// (the same every epoch, so `val_loss` stays comparable), for validation sets too large to
    /// evaluate whole every epoch. Default: all of them. 0 is an error.
    pub fn validation_steps(mut self, steps: usize) -> Self {
        self.validation_steps = Some(steps);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.validation_steps == Some(0) {
            return Err(Error::invalid("fit", "validation_steps must be at least 1"));
        }
        if self.steps_per_epoch == Some(0) {
            return Err(Error::invalid("fit", "steps_per_epoch must be at least 1"));
        }
        if self.accumulate_grad_batches == 0 {
            return Err(Error::invalid("fit", "accumulate_grad_batches must be at least 1"));
        }
        if self.batch_size == 0 || self.validation_batch_size == 0 {
            return Err(Error::invalid("fit", "batch size must be at least 1"));
        }
        if let Some(f) = self.validation_split {
            if !(f > 0.0 && f < 1.0) {
                return Err(Error::invalid("fit", format!("validation_split {f} must be in (0, 1)")));
            }
        }
        if self.top_k == Some(0) {
            return Err(Error::invalid("fit", "top_k must be at least 1"));
        }
        Ok(())
    }
}
