//! The training loop.

use std::ops::ControlFlow;
use std::time::Instant;

use crate::data::{DataLoader, Dataset, SampleFor, Target, TargetFor};
use crate::nn::named_parameters;
use crate::optim::schedule::Progress as SchedulePoint;
use crate::optim::{clip_grad_norm, Adam, Optimizer};
use crate::{Error, Model, Result};

use super::evaluate::{evaluate_dataset, model_device, EvalSettings};
use super::metrics::Stats;
use super::progress::Progress;
use super::{Callback, Fit, History, Loss, TrainContext, ValidationFor};

/// Builds a `TrainContext` from the loop's state and runs one callback hook on every callback.
macro_rules! each_callback {
    ($callbacks:expr, $model:expr, $optimizer:expr, $history:expr, $stop:expr, $epochs:expr, |$cb:ident, $ctx:ident| $body:expr) => {{
        for $cb in $callbacks.iter_mut() {
            let mut $ctx = TrainContext {
                model: &*$model,
                optimizer: &mut *$optimizer,
                history: &$history,
                stop: &mut $stop,
                epochs: $epochs,
            };
            $body?;
        }
    }};
}

/// Trains `model` on `train` as `cfg` says and returns the per-epoch metrics.
///
/// The dataset's sample shape must be the model's input shape and its targets must fit the
/// model's output (`Class<10>` for `Shape1<10>` logits): both are checked at compile time.
/// Each step runs forward, the loss, backward, optional clipping and the optimizer's fused
/// update on the parameters' device; the loss sum and correct count stay on the device and
/// are read only for the progress line and at the end of each epoch. An epoch whose training
/// loss is NaN or infinite ends `fit` with [`Error::NonFinite`] (after the callbacks saw it, so
/// `TerminateOnNaN` can restore weights first). After `fit` the model is in eval mode.
pub fn fit<M, D, V>(model: &mut M, train: &D, mut cfg: Fit<V>) -> Result<History>
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
    let loss = cfg.loss.unwrap_or(Loss::default_for(kind));
    loss.check(kind)?;
    let device = model_device(&*model);
    // Trainable parameters only, each tensor once: buffers are never stepped, tied weights once.
    let params = named_parameters(&*model);

    // Keras holds out the last samples, before any shuffling.
    let n = train.len();
    let n_val = cfg.validation_split.map_or(0, |f| ((n as f64) * f as f64).floor() as usize);
    let n_train = n - n_val;
    let mut loader = DataLoader::new(train, cfg.batch_size, &device)?
        .drop_last(cfg.drop_last)
        .prefetch(cfg.prefetch)
        .with_indices((0..n_train).collect())?;
    if let Some(seed) = cfg.shuffle_seed {
        loader = loader.shuffle(seed);
    }
    let steps = loader.len();
    if steps == 0 {
        return Err(Error::Data(format!(
            "fit: {n_train} training samples give no batch of size {}{}",
            cfg.batch_size,
            if cfg.drop_last { " with drop_last" } else { "" }
        )));
    }
    if cfg.validation_split.is_some() && n_val == 0 {
        return Err(Error::Data(format!("fit: validation_split leaves no validation sample out of {n}")));
    }
    let eval_settings = EvalSettings { batch_size: cfg.validation_batch_size, loss: Some(loss), top_k: cfg.top_k };

    let mut optimizer: Box<dyn Optimizer> = cfg.optimizer.take().unwrap_or_else(|| Box::new(Adam::new(1e-3)));
    let base_lr = optimizer.learning_rate();
    let mut callbacks: Vec<Box<dyn Callback>> = std::mem::take(&mut cfg.callbacks);
    let mut history = History::new();
    let mut stop: Option<String> = None;
    let mut progress = Progress::new(cfg.verbosity, cfg.epochs);
    let epochs = cfg.epochs;

    super::build_warning::warn_once_if_debug_build();
    each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb.on_train_begin(&mut ctx));
    for epoch in 0..epochs {
        let started = Instant::now();
        each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb
            .on_epoch_begin(epoch, &mut ctx));
        model.set_training(true);
        progress.epoch_begin(epoch, steps);
        let mut stats = Stats::new(kind, cfg.top_k, &device)?;
        let mut step = 0;
        let run = loader.for_each(epoch, |batch| {
            if let Some(schedule) = &cfg.schedule {
                let at = SchedulePoint {
                    epoch,
                    step: epoch * steps + step,
                    steps_per_epoch: steps,
                    total_steps: epochs * steps,
                };
                optimizer.set_learning_rate(schedule.learning_rate(base_lr, at));
            }
            let outputs = model.forward_raw(batch.inputs.raw())?;
            let batch_loss = loss.compute(&outputs, &batch.targets)?;
            let mut grads = batch_loss.backward()?;
            if let Some(max_norm) = cfg.clip_grad_norm {
                clip_grad_norm(&params, &mut grads, max_norm)?;
            }
            optimizer.step(&params, &grads)?;
            stats.add(&batch_loss, &outputs, &batch.targets)?;
            step += 1;
            if progress.live() && step % cfg.progress_every == 0 && step < steps {
                let logs = stats.read("")?;
                progress.update(step, &logs);
                each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb
                    .on_metrics(epoch, step, &logs, &mut ctx));
            }
            Ok(ControlFlow::Continue(()))
        });
        let mut logs = match run.and_then(|_| stats.read("")) {
            Ok(logs) => logs,
            Err(e) => {
                progress.abandon();
                return Err(e);
            }
        };
        if let Err(e) = (|| -> Result<()> {
            each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb
                .on_metrics(epoch, step, &logs, &mut ctx));
            Ok(())
        })() {
            progress.abandon();
            return Err(e);
        }
        // Without a callback that handles it (TerminateOnNaN restores weights above), a
        // non-finite loss, or weights the epoch's last step made non-finite (which no loss
        // computed before that step shows), end training: those weights are garbage.
        if let Err(e) = check_finite(&*model, &logs, epoch) {
            progress.abandon();
            return Err(e);
        }
        model.set_training(false);
        let validation = if n_val > 0 {
            Some(evaluate_dataset(&*model, train, Some((n_train..n).collect()), &eval_settings)?)
        } else {
            cfg.validation.evaluate_on(&*model, &eval_settings)?
        };
        if let Some(v) = validation {
            logs.insert("val_loss", v.loss);
            if !v.accuracy.is_nan() {
                logs.insert("val_accuracy", v.accuracy);
            }
            if let (Some(k), Some(a)) = (cfg.top_k, v.top_k_accuracy) {
                logs.insert(format!("val_top{k}_accuracy"), a);
            }
        }
        logs.insert("lr", optimizer.learning_rate());
        progress.epoch_end(epoch, steps, &logs);
        history.push(&logs, started.elapsed().as_secs_f64());
        each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb
            .on_epoch_end(epoch, &logs, &mut ctx));
        if stop.is_some() {
            break;
        }
    }
    each_callback!(callbacks, model, optimizer, history, stop, epochs, |cb, ctx| cb.on_train_end(&mut ctx));
    model.set_training(false);
    if let Some(reason) = &stop {
        if cfg.verbosity != super::Verbosity::Quiet {
            eprintln!("{reason}");
        }
    }
    history.set_stop_reason(stop);
    Ok(history)
}

/// The epoch's loss and the weights after its last step must be finite.
fn check_finite(model: &dyn crate::nn::Module, logs: &super::Logs, epoch: usize) -> Result<()> {
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
