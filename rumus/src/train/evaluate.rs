//! Evaluation and prediction: no graph recorded, the model's layers in eval mode, the model
//! itself unchanged (`&Model`).

use std::ops::ControlFlow;

use crate::data::{DataLoader, Dataset, SampleFor, Target, TargetFor};
use crate::nn::{named_params, EvalGuard, Module};
use crate::{Device, Error, Model, Result, Tensor};

use super::metric::MetricSet;
use super::metrics::Stats;
use super::{ClassCounts, ConfusionMatrix, Logs, Loss, Metric};

/// Settings of [`evaluate_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct EvalSettings {
    /// Samples per forward pass (default 256; it does not change the results).
    pub batch_size: usize,
    /// Default: the loss that fits the targets.
    pub loss: Option<Loss>,
    /// Also compute top-k accuracy (shorthand for `Metric::TopK(k)` in `metrics`).
    pub top_k: Option<usize>,
    /// The metrics besides the loss (and, for class targets, the accuracy); checked against
    /// the targets like [`Fit::metrics`](super::Fit::metrics).
    pub metrics: Vec<Metric>,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings { batch_size: 256, loss: None, top_k: None, metrics: Vec::new() }
    }
}

/// The result of [`evaluate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean loss per sample (per position, i.e. token, for per-position targets such as
    /// [`SeqClass`](crate::data::SeqClass)).
    pub loss: f32,
    /// Fraction of samples (positions, for per-position targets) whose largest logit is the
    /// target class (NaN for regression).
    pub accuracy: f32,
    /// Top-k accuracy (over positions like `accuracy`), when asked for (the first `k` asked for).
    pub top_k_accuracy: Option<f32>,
    /// Number of samples evaluated.
    pub samples: usize,
    /// Every value by the name `fit` logs it under: `loss`, `accuracy`, `top{k}_accuracy`,
    /// `precision`, `recall`, `f1`, `mae` (those that apply and were asked for).
    pub metrics: Logs,
    /// Per-class counts, precision, recall and F1, with [`Metric::Precision`],
    /// [`Metric::Recall`] or [`Metric::F1`].
    pub class_counts: Option<ClassCounts>,
    /// The confusion matrix, with [`Metric::ConfusionMatrix`].
    pub confusion_matrix: Option<ConfusionMatrix>,
}

/// The device of the model's first parameter (the CPU for a parameterless model).
pub(crate) fn model_device(model: &dyn Module) -> Device {
    named_params(model).first().map(|(_, p)| p.tensor().device().clone()).unwrap_or_else(Device::cpu)
}

/// At most `n` of `indices`, chosen by a fixed seeded shuffle (the same subset on every call),
/// in ascending order; all of them when there are no more than `n`.
pub(crate) fn fixed_subset(mut indices: Vec<usize>, n: usize) -> Vec<usize> {
    if indices.len() > n {
        crate::rng::Rng::new(0x5eed_7a11_da7a_0001).shuffle(&mut indices);
        indices.truncate(n);
        indices.sort_unstable();
    }
    indices
}

/// Evaluates on `data` (or the samples at `indices`), without switching modes.
pub(crate) fn evaluate_dataset<D: Dataset>(
    model: &dyn Module,
    data: &D,
    indices: Option<Vec<usize>>,
    settings: &EvalSettings,
) -> Result<Evaluation> {
    let _no_grad = crate::autograd::NoGradGuard::new();
    let kind = <D::Target as Target>::KIND;
    let loss = settings.loss.clone().unwrap_or_else(|| Loss::default_for(kind));
    loss.check(kind)?;
    let device = model_device(model);
    let mut loader = DataLoader::new(data, settings.batch_size, &device)?;
    if let Some(indices) = indices {
        loader = loader.with_indices(indices)?;
    }
    let metrics = MetricSet::resolve("evaluate", &settings.metrics, settings.top_k, kind)?;
    let mut stats = Stats::new(kind, &metrics, &device)?;
    loader.for_each(0, |batch| {
        // The prefetch thread has its own grad switch; this closure runs here, under no_grad.
        let out = model.forward_raw(batch.inputs.raw())?;
        let l = loss.compute(&out, &batch.targets)?;
        stats.add(&l, &out, &batch.targets)?;
        Ok(ControlFlow::Continue(()))
    })?;
    if stats.seen() == 0 {
        return Err(Error::Data("evaluate: the dataset has no samples".into()));
    }
    let reading = stats.read("")?;
    let logs = reading.logs;
    Ok(Evaluation {
        loss: logs.get("loss").unwrap_or(f32::NAN),
        accuracy: logs.get("accuracy").unwrap_or(f32::NAN),
        top_k_accuracy: metrics.top_k.first().and_then(|k| logs.get(&format!("top{k}_accuracy"))),
        samples: stats.seen(),
        metrics: logs,
        class_counts: reading.class_counts,
        confusion_matrix: reading.confusion,
    })
}

/// Mean loss and accuracy of `model` on `data` (and the metrics of [`evaluate_with`]'s
/// settings, there), in eval mode and without recording a graph.
/// The model is not changed: its layers act as in eval mode for this call only
/// ([`EvalGuard`]), whatever mode it is in.
pub fn evaluate<M: Model, D: Dataset>(model: &M, data: &D) -> Result<Evaluation>
where
    D::Sample: SampleFor<M::Input>,
    D::Target: TargetFor<M::Output>,
{
    evaluate_with(model, data, &EvalSettings::default())
}

/// [`evaluate`] with explicit settings.
pub fn evaluate_with<M: Model, D: Dataset>(model: &M, data: &D, settings: &EvalSettings) -> Result<Evaluation>
where
    D::Sample: SampleFor<M::Input>,
    D::Target: TargetFor<M::Output>,
{
    let _eval = EvalGuard::new();
    evaluate_dataset(model, data, None, settings)
}

/// The model's outputs for a batch of inputs, in eval mode (for this call only, see
/// [`evaluate`]) and without recording a graph.
pub fn predict<M: Model>(model: &M, inputs: &Tensor<M::Input>) -> Result<Tensor<M::Output>> {
    let _eval = EvalGuard::new();
    let _no_grad = crate::autograd::NoGradGuard::new();
    Tensor::from_raw(model.forward_raw(inputs.raw())?)
}
