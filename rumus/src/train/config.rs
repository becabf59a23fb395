//! `Fit`: the settings of one `fit` call, built Keras style.
//!
//! Validation data is borrowed: `.validation(&test)` turns a `Fit` into a `Fit<ValidationData<'_, D>>`
//! holding `&D`, so the data outlives the call without being copied, and its sample and target
//! types are checked against the model at compile time like the training data's.

use crate::data::transforms::Augment;
use crate::data::{Dataset, SampleFor, TargetFor};
use crate::distributed::{DataParallel, Distributed};
use crate::optim::{LossScaler, Optimizer, Schedule};
use crate::{Error, Model, RawTensor, Result};

use super::evaluate::{evaluate_dataset, fixed_subset, EvalSettings, Evaluation};
use super::{Callback, Loss, Metric};

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

    /// [`evaluate_on`](Self::evaluate_on) sharded over the ranks of `dist`, the sums reduced.
    #[doc(hidden)]
    fn evaluate_distributed(
        &self,
        model: &M,
        settings: &EvalSettings,
        samples: Option<usize>,
        dist: &Distributed,
    ) -> Result<Option<Evaluation>>;
}

impl<M: Model> ValidationFor<M> for NoValidation {
    fn evaluate_on(&self, _: &M, _: &EvalSettings, _: Option<usize>) -> Result<Option<Evaluation>> {
        Ok(None)
    }

    fn present(&self) -> bool {
        false
    }

    fn evaluate_distributed(
        &self,
        _: &M,
        _: &EvalSettings,
        _: Option<usize>,
        _: &Distributed,
    ) -> Result<Option<Evaluation>> {
        Ok(None)
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

    fn evaluate_distributed(
        &self,
        model: &M,
        settings: &EvalSettings,
        samples: Option<usize>,
        dist: &Distributed,
    ) -> Result<Option<Evaluation>> {
        let all: Vec<usize> = (0..self.0.len()).collect();
        let indices = match samples {
            Some(n) => fixed_subset(all, n),
            None => all,
        };
        DataParallel::new(dist.clone()).evaluate(model, self.0, indices, settings).map(Some)
    }
}

/// Settings of [`fit`](super::fit): `Fit::epochs(10).batch_size(64).optimizer(Adam::new(1e-3))`.
///
/// Callbacks may be borrowed (`'a`), so they can be read after `fit`:
///
/// ```no_run
/// # fn run<M: rumus::Model, D: rumus::data::Dataset>(model: &mut M, train: &D) -> rumus::Result<()>
/// # where D::Sample: rumus::data::SampleFor<M::Input>, D::Target: rumus::data::TargetFor<M::Output> {
/// use rumus::train::{fit, EarlyStopping, Fit};
/// let mut stopper = EarlyStopping::new("loss").patience(2);
/// fit(model, train, Fit::epochs(20).callback(&mut stopper))?;
/// println!("best epoch: {:?}", stopper.best_epoch());
/// # Ok(()) }
/// ```
pub struct Fit<'a, V = NoValidation> {
    pub(crate) epochs: usize,
    pub(crate) batch_size: usize,
    pub(crate) validation_batch_size: usize,
    pub(crate) optimizer: Option<Box<dyn Optimizer>>,
    pub(crate) validation: V,
    pub(crate) validation_split: Option<f32>,
    pub(crate) shuffle_seed: Option<u64>,
    pub(crate) drop_last: bool,
    pub(crate) loss: Option<Loss>,
    pub(crate) callbacks: Vec<Box<dyn Callback + 'a>>,
    pub(crate) verbosity: Verbosity,
    pub(crate) clip_grad_norm: Option<f32>,
    pub(crate) schedule: Option<Box<dyn Schedule>>,
    pub(crate) top_k: Option<usize>,
    pub(crate) metrics: Vec<Metric>,
    pub(crate) progress_every: usize,
    pub(crate) prefetch: bool,
    pub(crate) steps_per_epoch: Option<usize>,
    pub(crate) accumulate_grad_batches: usize,
    pub(crate) validation_steps: Option<usize>,
    pub(crate) distributed: Option<Distributed>,
    pub(crate) bucket_cap_mb: Option<f32>,
    pub(crate) augment: Option<Augment>,
    pub(crate) loss_scaler: Option<LossScaler>,
}

impl Fit<'_, NoValidation> {
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
            metrics: Vec::new(),
            progress_every: 10,
            prefetch: true,
            steps_per_epoch: None,
            accumulate_grad_batches: 1,
            validation_steps: None,
            distributed: None,
            bucket_cap_mb: None,
            augment: None,
            loss_scaler: None,
        }
    }
}

impl<'a, V> Fit<'a, V> {
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
    pub fn validation<D: Dataset>(self, data: &D) -> Fit<'a, ValidationData<'_, D>> {
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
            metrics: self.metrics,
            progress_every: self.progress_every,
            prefetch: self.prefetch,
            steps_per_epoch: self.steps_per_epoch,
            accumulate_grad_batches: self.accumulate_grad_batches,
            validation_steps: self.validation_steps,
            distributed: self.distributed,
            bucket_cap_mb: self.bucket_cap_mb,
            augment: self.augment,
            loss_scaler: self.loss_scaler,
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

    /// The loss (default: cross-entropy for class targets, MSE for regression targets); see
    /// [`Loss`] for each loss's target kind, checked when `fit` starts.
    pub fn loss(mut self, loss: Loss) -> Self {
        self.loss = Some(loss);
        self
    }

    /// A user-written loss: `f(outputs, targets)` over the model's raw outputs and the batch's
    /// targets returns the batch's loss, a differentiable scalar (anything else ends `fit` with
    /// an error at the first batch). The dataset's targets are still matched to the model's
    /// output at compile time.
    ///
    /// ```
    /// use rumus::prelude::*;
    ///
    /// // Mean absolute error, written by hand.
    /// let cfg = Fit::epochs(1).loss_fn(|outputs, targets| outputs.sub(targets)?.abs()?.mean_all());
    /// # let _ = cfg;
    /// ```
    pub fn loss_fn(self, f: impl Fn(&RawTensor, &RawTensor) -> Result<RawTensor> + Send + Sync + 'static) -> Self {
        self.loss(Loss::custom(f))
    }

    /// Adds a callback; callbacks run in the order added. A callback lent as `&mut` can be read
    /// after `fit` (`stopper.best_epoch()`, `checkpoint.saved()`).
    pub fn callback(mut self, callback: impl Callback + 'a) -> Self {
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

    /// Also reports `top{k}_accuracy` (class targets): shorthand for
    /// `.metrics([Metric::TopK(k)])`.
    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }

    /// Adds metrics computed on the device besides the loss (and, for class targets, the
    /// accuracy), shown in the progress line and recorded in the [`History`](super::History):
    /// `.metrics([Metric::F1, Metric::TopK(5), Metric::ConfusionMatrix])`. Checked against the
    /// targets when `fit` starts (see [`Metric`]).
    pub fn metrics(mut self, metrics: impl IntoIterator<Item = Metric>) -> Self {
        self.metrics.extend(metrics);
        self
    }

    /// In progress-bar mode, read the metrics and redraw every `steps` steps (default 10). Each
    /// read is one small device → host transfer.
    pub fn progress_every(mut self, steps: usize) -> Self {
        self.progress_every = steps.max(1);
        self
    }

    /// Augments every training batch with `augment` (images `[n, c, h, w]`; never the
    /// validation or evaluation batches). A sample's draws depend on the augmentation's seed, the
    /// epoch and the sample's position in the epoch's order (with
    /// [`distributed`](Self::distributed): the global order, so ranks draw for their samples
    /// what one process of the global batch size would).
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

    /// Data-parallel training over the ranks of `dist` (see [`crate::distributed`]):
    /// [`batch_size`](Self::batch_size) is per rank, so each step averages the gradients of
    /// `batch_size · dist.size()` samples, and an incomplete last global batch of an epoch is
    /// dropped (with one rank: as [`drop_last`](Self::drop_last)). Rank 0's weights and
    /// optimizer state are broadcast when `fit` starts (so resuming needs them on rank 0 only);
    /// the gradients are reduced in buckets during backward ([`bucket_cap_mb`](Self::bucket_cap_mb));
    /// every rank gets the same reduced metrics and `History`;
    /// only rank 0 prints and writes files. A step where a rank's gradients are NaN or
    /// infinite (unless a [`loss_scaler`](Self::loss_scaler) skips it on every rank), or its
    /// step fails, ends `fit` on every rank with an error naming that rank; any other failure
    /// of one rank ends the whole job (`Collective::abort`).
    pub fn distributed(mut self, dist: &Distributed) -> Self {
        self.distributed = Some(dist.clone());
        self
    }

    /// With [`distributed`](Self::distributed): the most gradient each bucket holds, in MiB of
    /// f32 (default 25, PyTorch DDP's `bucket_cap_mb`). The trainable parameters are grouped,
    /// last layers first, into buckets of at most this size (a larger parameter alone in its
    /// own); each bucket's all-reduce starts as soon as backward has finished its gradients,
    /// while backward computes the rest, and `fit` waits for every bucket before clipping and
    /// the optimizer step. Each bucket is one read-back and one upload on a GPU: smaller
    /// buckets overlap more but cost more transfers and collectives. `f32::INFINITY` gives one
    /// bucket (no overlap). Not positive is an error when `fit` starts.
    pub fn bucket_cap_mb(mut self, mb: f32) -> Self {
        self.bucket_cap_mb = Some(mb);
        self
    }

    /// Dynamic loss scaling, for mixed precision with f16 tensor cores
    /// ([`MatmulPrecision::F16TensorCores`](crate::MatmulPrecision::F16TensorCores)), where
    /// small gradients would otherwise flush to zero: each batch's backward pass runs on its loss
    /// times [`scaler.scale()`](LossScaler::scale) (the logged `loss` stays unscaled), and each
    /// optimizer step goes through [`LossScaler::step`]: the gradients (accumulated scaled, with
    /// [`accumulate_grad_batches`](Self::accumulate_grad_batches)) are unscaled once, then clipped
    /// ([`clip_grad_norm`](Self::clip_grad_norm)) and applied, or, when one is NaN or infinite,
    /// the step is skipped and the scale backs off. Every epoch's logs get the scale after it as
    /// `loss_scale`. With [`distributed`](Self::distributed), a rank's non-finite gradients are
    /// then no error: every rank gets the same averaged gradients, so all skip the step together.
    ///
    /// ```
    /// use rumus::prelude::*;
    ///
    /// let cfg = Fit::epochs(10).loss_scaler(LossScaler::new().growth_interval(1000)?);
    /// # let _ = cfg;
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn loss_scaler(mut self, scaler: LossScaler) -> Self {
        self.loss_scaler = Some(scaler);
        self
    }

    pub(crate) fn check(&self) -> Result<()> {
        if let Some(mb) = self.bucket_cap_mb {
            if mb.is_nan() || mb <= 0.0 {
                return Err(Error::invalid("fit", format!("bucket_cap_mb {mb} must be positive")));
            }
        }
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
        Ok(())
    }
}
