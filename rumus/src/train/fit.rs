//! The training loop: [`fit`] sets up a `Trainer` and runs it epoch by epoch (`train_epoch`,
//! `validate`, `end_epoch`), then `finish`.

use std::ops::ControlFlow;
use std::time::Instant;

use crate::data::{Batch, DataLoader, Dataset, SampleFor, Target, TargetFor, TargetKind};
use crate::distributed::DataParallel;
use crate::nn::{named_parameters, Param};
use crate::optim::schedule::Progress as SchedulePoint;
use crate::optim::{clip_grad_norm, Adam, LossScaler, Optimizer, Schedule};
use crate::{Device, Error, Gradients, Model, Result};

use super::accumulate::add_gradients;
use super::epoch_batches::EpochBatches;
use super::evaluate::{evaluate_dataset, fixed_subset, model_device, EvalSettings};
use super::metric::MetricSet;
use super::metrics::{Reading, Stats};
use super::progress::Progress;
use super::{Callback, ClassCounts, ConfusionMatrix, Fit, History, Logs, Loss, TrainContext, ValidationFor};

/// Trains `model` on `train` as `cfg` says and returns the per-epoch metrics.
///
/// The dataset's sample shape must be the model's input shape and its targets must fit the
/// model's output (`Class<10>` for `Shape1<10>` logits, `SeqClass<T, V>` for `Shape2<T, V>`):
/// both are checked at compile time. Each batch runs forward, the loss and backward; every
/// [`accumulate_grad_batches`](Fit::accumulate_grad_batches) batches (default 1) the summed
/// gradients are optionally clipped and the optimizer's fused update runs on the parameters'
/// device (with a [`loss_scaler`](Fit::loss_scaler), backward runs on the scaled loss and the
/// gradients are unscaled, checked and maybe skipped before that). The loss sum and correct
/// count stay on the device and are read only for the progress line and at the end of each
/// epoch, as are the chosen [`metrics`](Fit::metrics), which are checked against the targets
/// first. Every callback's [`check`](Callback::check) runs before any `on_train_begin` (so a
/// monitored metric this run does not log is an error before any file is written). An epoch
/// whose training loss is NaN or infinite ends `fit` with [`Error::NonFinite`] (after the callbacks saw it, so `TerminateOnNaN` can
/// restore weights first). After `fit` the model is in eval mode.
pub fn fit<M, D, V>(model: &mut M, train: &D, mut cfg: Fit<'_, V>) -> Result<History>
where
    M: Model,
    D: Dataset,
    D::Sample: SampleFor<M::Input>,
    D::Target: TargetFor<M::Output>,
    V: ValidationFor<M>,
{
    cfg.check()?;
    if cfg.validation_split.is_some() && cfg.validation.present() {
        return Err(Error::invalid("fit", "give either validation data or validation_split, not both"));
    }
    let kind = <D::Target as Target>::KIND;
    let loss = cfg.loss.clone().unwrap_or_else(|| Loss::default_for(kind));
    loss.check(kind)?;
    let metrics = MetricSet::resolve("fit", &cfg.metrics, cfg.top_k, kind)?;
    let device = model_device(&*model);

    // Keras holds out the last samples, before any shuffling.
    let n = train.len();
    let n_val = cfg.validation_split.map_or(0, |f| ((n as f64) * f as f64).floor() as usize);
    let n_train = n - n_val;
    let mut batches = EpochBatches::new(
        train,
        &device,
        train_loader(train, &cfg, &device, n_train)?,
        cfg.prefetch,
        cfg.steps_per_epoch.map(|steps| steps.saturating_mul(cfg.accumulate_grad_batches)),
    );
    let bucket_cap_mb = cfg.bucket_cap_mb;
    let scaled = cfg.loss_scaler.is_some();
    let dp = cfg.distributed.take().map(|dist| {
        let dp = DataParallel::new(dist).allow_non_finite(scaled);
        match bucket_cap_mb {
            Some(mb) => dp.bucket_cap_mb(mb),
            None => dp,
        }
    });
    if let Some(dp) = &dp {
        batches = batches.shard(dp.rank(), dp.size());
        if batches.is_empty() {
            return Err(Error::Data(format!(
                "fit: {n_train} training samples give no global batch of {} ranks x {}",
                dp.size(),
                cfg.batch_size
            )));
        }
    }
    if cfg.validation_split.is_some() && n_val == 0 {
        return Err(Error::Data(format!("fit: validation_split leaves no validation sample out of {n}")));
    }
    let eval_settings = EvalSettings {
        batch_size: cfg.validation_batch_size,
        loss: Some(loss.clone()),
        top_k: cfg.top_k,
        metrics: cfg.metrics.clone(),
    };
    let validated = n_val > 0 || cfg.validation.present();
    let validation_samples = cfg.validation_steps.map(|steps| steps.saturating_mul(cfg.validation_batch_size));
    let validation_split = (n_val > 0).then(|| {
        let held_out = (n_train..n).collect::<Vec<_>>();
        match validation_samples {
            Some(limit) => fixed_subset(held_out, limit),
            None => held_out,
        }
    });

    let mut trainer = Trainer::new(model, &mut cfg, loss, (kind, metrics, validated), &device, batches.len(), dp)?;
    if trainer.dp.as_ref().is_none_or(|dp| dp.rank() == 0) {
        super::build_warning::warn_once_if_debug_build();
    }
    // Every rank checks the same callbacks against the same names, so a mistake ends each
    // rank here, before any collective.
    trainer.check_callbacks()?;
    let run = (|| {
        if let Some(dp) = &trainer.dp {
            dp.broadcast_model(&*trainer.model)?;
            dp.broadcast_optimizer(&mut *trainer.optimizer, &trainer.step.params)?;
        }
        trainer.each_callback(|cb, ctx| cb.on_train_begin(ctx))?;
        for epoch in 0..trainer.epochs {
            let started = Instant::now();
            trainer.each_callback(|cb, ctx| cb.on_epoch_begin(epoch, ctx))?;
            let mut logs = trainer.train_epoch(epoch, &mut batches)?;
            let held_out = validation_split.as_deref().map(|indices| (train, indices));
            trainer.validate(held_out, (&cfg.validation, validation_samples), &eval_settings, &mut logs)?;
            if trainer.end_epoch(epoch, logs, started)? {
                break;
            }
        }
        Ok(())
    })();
    match (run, &trainer.dp) {
        (Ok(()), _) => trainer.finish(),
        (Err(e), Some(dp)) => Err(dp.fail(e)),
        (Err(e), None) => Err(e),
    }
}

/// The loader of the training samples `0..n_train`, shuffled per epoch as `cfg` says; an
/// error when a pass would give no batch.
fn train_loader<'a, D: Dataset, V>(
    train: &'a D,
    cfg: &Fit<'_, V>,
    device: &Device,
    n_train: usize,
) -> Result<DataLoader<'a, D>> {
    let mut loader = DataLoader::new(train, cfg.batch_size, device)?
        .drop_last(cfg.drop_last)
        .prefetch(cfg.prefetch)
        .with_indices((0..n_train).collect())?
        .augment(cfg.augment.clone());
    if let Some(seed) = cfg.shuffle_seed {
        loader = loader.shuffle(seed);
    }
    if loader.is_empty() {
        return Err(Error::Data(format!(
            "fit: {n_train} training samples give no batch of size {}{}",
            cfg.batch_size,
            if cfg.drop_last { " with drop_last" } else { "" }
        )));
    }
    Ok(loader)
}

/// The state of one `fit` run: the model, the optimizer, the callbacks and what they share,
/// the per-step settings, and the progress display (which a failed run leaves as it is when
/// the trainer is dropped).
struct Trainer<'m, 'c, M: Model> {
    model: &'m mut M,
    optimizer: Box<dyn Optimizer>,
    callbacks: Vec<Box<dyn Callback + 'c>>,
    history: History,
    stop: Option<String>,
    progress: Progress,
    epochs: usize,
    verbosity: super::Verbosity,
    step: StepSettings,
    kind: TargetKind,
    metrics: MetricSet,
    /// The names of every epoch's logs (what callbacks may monitor).
    metric_names: Vec<String>,
    /// The per-class counts and confusion matrices of the epoch so far, for the history:
    /// training's, then validation's.
    classes: Vec<(&'static str, Option<ClassCounts>, Option<ConfusionMatrix>)>,
    device: Device,
    /// Batches per epoch.
    batches: usize,
    /// Data-parallel training: this rank's side of the collectives.
    dp: Option<DataParallel>,
    /// Dynamic loss scaling ([`Fit::loss_scaler`]).
    scaler: Option<LossScaler>,
}

/// What each training step needs from the `Fit` settings.
struct StepSettings {
    /// Trainable parameters only, each tensor once: buffers are never stepped, tied weights once.
    params: Vec<(String, Param)>,
    loss: Loss,
    clip_grad_norm: Option<f32>,
    schedule: Option<Box<dyn Schedule>>,
    base_lr: f32,
    accumulate: usize,
    progress_every: usize,
}

impl<'m, 'c, M: Model> Trainer<'m, 'c, M> {
    /// `(kind, metrics, validated)`: the target kind, the metrics resolved for it, and whether
    /// there is validation data.
    fn new<V>(
        model: &'m mut M,
        cfg: &mut Fit<'c, V>,
        loss: Loss,
        (kind, metrics, validated): (TargetKind, MetricSet, bool),
        device: &Device,
        batches: usize,
        dp: Option<DataParallel>,
    ) -> Result<Self> {
        let optimizer: Box<dyn Optimizer> = cfg.optimizer.take().unwrap_or_else(|| Box::new(Adam::new(1e-3)));
        let steps = batches.div_ceil(cfg.accumulate_grad_batches);
        if cfg.epochs.checked_mul(steps).is_none() {
            return Err(Error::invalid("fit", format!("{} epochs of {steps} steps overflow", cfg.epochs)));
        }
        // Only rank 0 of a data-parallel job prints.
        let verbosity =
            if dp.as_ref().is_some_and(|dp| dp.rank() != 0) { super::Verbosity::Quiet } else { cfg.verbosity };
        let scaler = cfg.loss_scaler.take();
        Ok(Trainer {
            step: StepSettings {
                params: named_parameters(&*model),
                loss,
                clip_grad_norm: cfg.clip_grad_norm,
                schedule: cfg.schedule.take(),
                base_lr: optimizer.learning_rate(),
                accumulate: cfg.accumulate_grad_batches,
                progress_every: cfg.progress_every,
            },
            model,
            optimizer,
            callbacks: std::mem::take(&mut cfg.callbacks),
            history: History::new(),
            stop: None,
            progress: Progress::new(verbosity, cfg.epochs),
            epochs: cfg.epochs,
            verbosity,
            kind,
            metric_names: metric_names(&metrics, kind, validated, scaler.is_some()),
            metrics,
            classes: Vec::new(),
            device: device.clone(),
            batches,
            dp,
            scaler,
        })
    }

    /// Optimizer steps per epoch: one per `accumulate` batches (the last one may take fewer).
    fn steps(&self) -> usize {
        self.batches.div_ceil(self.step.accumulate)
    }

    /// Every callback's `check`, before any of them starts.
    fn check_callbacks(&mut self) -> Result<()> {
        let mut stop = None;
        let ctx = TrainContext {
            model: &*self.model,
            optimizer: &mut *self.optimizer,
            history: &self.history,
            stop: &mut stop,
            epochs: self.epochs,
            metric_names: &self.metric_names,
        };
        self.callbacks.iter().try_for_each(|cb| cb.check(&ctx))
    }

    /// Runs `hook` on every callback with a `TrainContext` over the trainer's state.
    fn each_callback(
        &mut self,
        mut hook: impl FnMut(&mut dyn Callback, &mut TrainContext<'_>) -> Result<()>,
    ) -> Result<()> {
        for cb in self.callbacks.iter_mut() {
            let mut ctx = TrainContext {
                model: &*self.model,
                optimizer: &mut *self.optimizer,
                history: &self.history,
                stop: &mut self.stop,
                epochs: self.epochs,
                metric_names: &self.metric_names,
            };
            hook(cb.as_mut(), &mut ctx)?;
        }
        Ok(())
    }

    /// One epoch of training steps; returns its logs (loss, accuracies) once the callbacks saw
    /// them and they (and the weights) are finite.
    fn train_epoch<D: Dataset>(&mut self, epoch: usize, batches: &mut EpochBatches<'_, D>) -> Result<Logs> {
        self.model.set_training(true);
        let steps = self.steps();
        self.progress.epoch_begin(epoch, steps);
        let mut stats = Stats::new(self.kind, &self.metrics, &self.device)?;
        let mut pending: Option<Gradients> = None;
        let mut seen = 0;
        let mut step = 0;
        batches.for_each(epoch, |batch| {
            if let Err(e) = self.train_batch(epoch, seen, batch, &mut stats, &mut pending) {
                if let Some(dp) = &self.dp {
                    dp.announce_failure(&self.step.params, (epoch, step));
                }
                return Err(e);
            }
            seen += 1;
            if seen % self.step.accumulate == 0 || seen == self.batches {
                self.optimizer_step(&mut pending)?;
                step += 1;
                if self.progress.live() && step % self.step.progress_every == 0 && step < steps {
                    let logs = stats.read("")?.logs;
                    self.progress.update(step, &logs);
                    self.each_callback(|cb, ctx| cb.on_metrics(epoch, step, &logs, ctx))?;
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        let mut reading = stats.read("")?;
        if let Some(dp) = &self.dp {
            dp.reduce_reading(&mut reading, "")?;
            dp.average_buffers(&*self.model)?;
        }
        let Reading { logs, class_counts, confusion } = reading;
        self.classes = vec![("", class_counts, confusion)];
        self.each_callback(|cb, ctx| cb.on_metrics(epoch, step, &logs, ctx))?;
        // Without a callback that handles it (TerminateOnNaN restores weights above), a
        // non-finite loss, or weights the epoch's last step made non-finite (which no loss
        // computed before that step shows), end training: those weights are garbage.
        check_finite(&*self.model, &logs, epoch)?;
        Ok(logs)
    }

    /// Forward and backward of the epoch's batch `index`, its gradients (scaled by one over the
    /// size of its accumulation group, so a step uses their mean, and by the loss scale, if
    /// any, until the step unscales them) added to `pending`.
    fn train_batch<S: crate::Shape>(
        &mut self,
        epoch: usize,
        index: usize,
        batch: Batch<S>,
        stats: &mut Stats,
        pending: &mut Option<Gradients>,
    ) -> Result<()> {
        let k = self.step.accumulate;
        let group_start = index - index % k;
        if index == group_start {
            self.set_scheduled_rate(epoch, index / k);
        }
        let outputs = self.model.forward_raw(batch.inputs.raw())?;
        let batch_loss = self.step.loss.compute(&outputs, &batch.targets)?;
        let group = k.min(self.batches - group_start);
        let scaled = if group == 1 { batch_loss.clone() } else { batch_loss.mul_scalar(1.0 / group as f32)? };
        let scaled = match &self.scaler {
            Some(scaler) => scaler.scale_loss(&scaled)?,
            None => scaled,
        };
        match &self.dp {
            // The group's last batch: backward with the gradients averaged over the ranks, each
            // bucket's reduction overlapping the rest of the pass.
            Some(dp) if dp.size() > 1 && index + 1 == group_start + group => {
                let at = (epoch, index / k);
                *pending = Some(dp.backward_averaged(&self.step.params, &scaled, pending.take(), at)?);
            }
            _ => add_gradients(&self.step.params, pending, scaled.backward()?)?,
        }
        stats.add(&batch_loss, &outputs, &batch.targets)
    }

    /// Before the epoch's optimizer step `step`: the schedule's learning rate, if any.
    fn set_scheduled_rate(&mut self, epoch: usize, step: usize) {
        if let Some(schedule) = &self.step.schedule {
            let steps = self.steps();
            let at = SchedulePoint {
                epoch,
                step: epoch * steps + step,
                steps_per_epoch: steps,
                total_steps: self.epochs * steps,
            };
            self.optimizer.set_learning_rate(schedule.learning_rate(self.step.base_lr, at));
        }
    }

    /// Clips and applies the accumulated gradients (averaged over the ranks by the group's last
    /// backward pass, when data-parallel); with a loss scaler, unscales them first and skips
    /// the step when one is not finite.
    fn optimizer_step(&mut self, pending: &mut Option<Gradients>) -> Result<()> {
        let Some(mut grads) = pending.take() else {
            return Ok(());
        };
        if let Some(scaler) = &mut self.scaler {
            // Data-parallel, every rank holds the same averaged (still scaled) gradients, and
            // a rank's non-finite ones travel in the sums rather than end `fit`
            // (`DataParallel::allow_non_finite`): every rank's scaler, alike from the start,
            // makes the same decision, so all ranks skip or step together and keep one scale.
            scaler.step(&mut *self.optimizer, &self.step.params, &mut grads, self.step.clip_grad_norm)?;
            return Ok(());
        }
        if let Some(max_norm) = self.step.clip_grad_norm {
            clip_grad_norm(&self.step.params, &mut grads, max_norm)?;
        }
        self.optimizer.step(&self.step.params, &grads)
    }

    /// Switches the model to eval mode and adds `val_loss`, `val_accuracy` and the chosen
    /// metrics' `val_` values to `logs`, from the `held_out` training samples if any, else from
    /// the validation `data` (at most `samples` of them) if any.
    fn validate<D: Dataset, V: ValidationFor<M>>(
        &mut self,
        held_out: Option<(&D, &[usize])>,
        (data, samples): (&V, Option<usize>),
        settings: &EvalSettings,
        logs: &mut Logs,
    ) -> Result<()> {
        self.model.set_training(false);
        let validation = match (held_out, &self.dp) {
            (Some((train, indices)), Some(dp)) => Some(dp.evaluate(&*self.model, train, indices.to_vec(), settings)?),
            (Some((train, indices)), None) => {
                Some(evaluate_dataset(&*self.model, train, Some(indices.to_vec()), settings)?)
            }
            (None, Some(dp)) => data.evaluate_distributed(&*self.model, settings, samples, dp.handle())?,
            (None, None) => data.evaluate_on(&*self.model, settings, samples)?,
        };
        if let Some(v) = validation {
            for (name, value) in v.metrics.iter() {
                logs.insert(format!("val_{name}"), value);
            }
            self.classes.push(("val_", v.class_counts, v.confusion_matrix));
        }
        Ok(())
    }

    /// Records the epoch's logs (with the learning rate, and the loss scale when there is a
    /// scaler), ends its progress line and runs the `on_epoch_end` callbacks. Returns whether a
    /// callback asked to stop.
    fn end_epoch(&mut self, epoch: usize, mut logs: Logs, started: Instant) -> Result<bool> {
        logs.insert("lr", self.optimizer.learning_rate());
        if let Some(scaler) = &self.scaler {
            logs.insert("loss_scale", scaler.scale());
        }
        self.progress.epoch_end(epoch, self.steps(), &logs);
        self.history.push(&logs, started.elapsed().as_secs_f64());
        for (prefix, counts, confusion) in std::mem::take(&mut self.classes) {
            self.history.record_classes(prefix, counts, confusion);
        }
        self.each_callback(|cb, ctx| cb.on_epoch_end(epoch, &logs, ctx))?;
        Ok(self.stop.is_some())
    }

    /// Runs `on_train_end`, leaves the model in eval mode and returns the history.
    fn finish(mut self) -> Result<History> {
        self.each_callback(|cb, ctx| cb.on_train_end(ctx))?;
        self.model.set_training(false);
        if let Some(reason) = &self.stop {
            if self.verbosity != super::Verbosity::Quiet {
                eprintln!("{reason}");
            }
        }
        let mut history = std::mem::take(&mut self.history);
        history.set_stop_reason(self.stop.take());
        Ok(history)
    }
}

/// The names of every epoch's logs: the training metrics, their `val_` forms when there is
/// validation data, `lr`, and `loss_scale` with a loss scaler.
fn metric_names(metrics: &MetricSet, kind: TargetKind, validated: bool, scaled: bool) -> Vec<String> {
    let names = metrics.names(kind);
    let validation = names.iter().filter(|_| validated).map(|n| format!("val_{n}")).collect::<Vec<_>>();
    let scale = scaled.then(|| "loss_scale".to_string());
    names.iter().cloned().chain(validation).chain(["lr".to_string()]).chain(scale).collect()
}

/// The epoch's loss and the weights after its last step must be finite.
fn check_finite(model: &dyn crate::nn::Module, logs: &Logs, epoch: usize) -> Result<()> {
    let what = match logs.get("loss").filter(|l| !l.is_finite()) {
        Some(l) => format!("the training loss became {l}"),
        None if !super::finite::weights_finite(model)? => "a step made the weights NaN or infinite".to_string(),
        None => return Ok(()),
    };
    Err(Error::NonFinite(format!(
        "fit: {what} in epoch {} (NaN or infinite inputs, targets or weights; a lower learning rate, \
         clip_grad_norm, or TerminateOnNaN to restore the last good weights)",
        epoch + 1
    )))
}
