//! What `fit` does on each rank of a data-parallel job: the weight broadcast, the gradient
//! bucket and its status slots, the reduction of buffers, metrics and evaluations.

use std::cell::Cell;

use crate::data::Dataset;
use crate::nn::{named_buffers, named_parameters, Module, Param};
use crate::train::{ClassCounts, ConfusionMatrix, EvalSettings, Evaluation, Logs, Reading};
use crate::{Error, Gradients, RawTensor, Result};

use super::{shard_range, Distributed};

/// A rank's status slot in the gradient bucket: its step went well.
const OK: f32 = 0.0;
/// Its local gradients hold a NaN or an infinity.
const NON_FINITE: f32 = 1.0;
/// Its step failed with an error (which it reports itself).
const FAILED: f32 = 2.0;

/// The data-parallel side of one `fit` run.
pub(crate) struct DataParallel {
    dist: Distributed,
    /// A failure every rank learnt of in a collective: each returns its error and none aborts.
    agreed: Cell<bool>,
}

/// Where in training a collective happens, for messages: `(epoch, step)`, both 0-based.
pub(crate) type At = (usize, usize);

impl DataParallel {
    pub(crate) fn new(dist: Distributed) -> Self {
        DataParallel { dist, agreed: Cell::new(false) }
    }

    pub(crate) fn handle(&self) -> &Distributed {
        &self.dist
    }

    pub(crate) fn rank(&self) -> usize {
        self.dist.rank()
    }

    pub(crate) fn size(&self) -> usize {
        self.dist.size()
    }

    /// Rank 0's parameters and buffers, copied into every rank's model.
    pub(crate) fn broadcast_model(&self, model: &dyn Module) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let tensors: Vec<Param> =
            named_parameters(model).into_iter().chain(named_buffers(model)).map(|(_, p)| p).collect();
        let mut flat = Vec::new();
        for p in &tensors {
            flat.extend(p.to_vec()?);
        }
        self.dist.collective().broadcast(&mut flat, 0, "fit: broadcast of rank 0's initial weights")?;
        let mut start = 0;
        for p in &tensors {
            let n = p.tensor().numel();
            let value = RawTensor::from_vec(flat[start..start + n].to_vec(), p.shape(), p.tensor().device())?;
            p.assign(&value)?;
            start += n;
        }
        Ok(())
    }

    /// Scalars in the gradient bucket: every trainable parameter, then one status slot per rank.
    fn bucket_len(&self, params: &[(String, Param)]) -> usize {
        crate::nn::unique_trainable(params).iter().map(|(_, p)| p.tensor().numel()).sum::<usize>() + self.size()
    }

    /// Replaces `grads` with their mean over the ranks: one flat bucket read back once, summed
    /// by the collective, uploaded once. A rank whose gradients are not finite, or that failed
    /// ([`announce_failure`](Self::announce_failure)), makes this an error on every rank.
    pub(crate) fn average_gradients(&self, params: &[(String, Param)], grads: &mut Gradients, at: At) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let _no_grad = crate::autograd::NoGradGuard::new();
        let unique = crate::nn::unique_trainable(params);
        let Some((_, first)) = unique.first() else {
            return self.exchange(vec![OK; self.size()], at).map(|_| ());
        };
        let device = first.tensor().device().clone();
        let mut present = Vec::with_capacity(unique.len());
        let mut flat = Vec::with_capacity(unique.len());
        for (_, p) in &unique {
            let n = p.tensor().numel();
            present.push(grads.get(p.tensor()).is_some());
            flat.push(match grads.get(p.tensor()) {
                Some(g) => g.reshape(&[n])?,
                None => RawTensor::zeros(&[n], &device)?,
            });
        }
        let refs: Vec<&RawTensor> = flat.iter().collect();
        let mut bucket = RawTensor::concat(&refs, 0)?.to_vec()?;
        drop(flat);
        let total = bucket.len();
        let status = if bucket.iter().all(|v| v.is_finite()) { OK } else { NON_FINITE };
        bucket.extend((0..self.size()).map(|r| if r == self.rank() { status } else { OK }));
        let mut bucket = self.exchange(bucket, at)?;
        bucket.truncate(total);
        let scale = 1.0 / self.size() as f32;
        bucket.iter_mut().for_each(|v| *v *= scale);
        let mean = RawTensor::from_vec(bucket, &[total], &device)?;
        let mut start = 0;
        for ((_, p), here) in unique.iter().zip(present) {
            let n = p.tensor().numel();
            if here {
                let g = mean.narrow(0, start, start + n)?.contiguous()?.reshape(p.shape())?;
                grads.insert(p.tensor().id(), g);
            }
            start += n;
        }
        Ok(())
    }

    /// Sums `bucket` (whose last `size` entries are the status slots) over the ranks; an error
    /// naming the first rank whose slot is not OK.
    fn exchange(&self, mut bucket: Vec<f32>, (epoch, step): At) -> Result<Vec<f32>> {
        let what = format!("fit: all-reduce of the gradients (epoch {}, step {})", epoch + 1, step + 1);
        self.dist.collective().all_reduce_sum(&mut bucket, &what)?;
        let slots = &bucket[bucket.len() - self.size()..];
        let Some((rank, &code)) = slots.iter().enumerate().find(|(_, &s)| s != OK) else {
            return Ok(bucket);
        };
        self.agreed.set(true);
        let n = self.size();
        let place = format!("step {} of epoch {}", step + 1, epoch + 1);
        Err(if code == NON_FINITE {
            Error::NonFinite(format!(
                "fit: rank {rank} of {n} computed NaN or infinite gradients in {place}; every rank stops \
                 (NaN or infinite inputs, targets or weights; a lower learning rate or clip_grad_norm)"
            ))
        } else {
            Error::Training(format!("rank {rank} of {n} failed in {place} (its own output says why); every rank stops"))
        })
    }

    /// Takes part in this step's gradient reduction with this rank's status slot set to
    /// failed, so every other rank stops with an error naming it. Called by a rank whose step
    /// failed before its gradients were ready; it then returns its own error.
    pub(crate) fn announce_failure(&self, params: &[(String, Param)], at: At) {
        if self.size() == 1 {
            return;
        }
        let mut bucket = vec![0.0; self.bucket_len(params)];
        let slot = bucket.len() - self.size() + self.rank();
        bucket[slot] = FAILED;
        let _ = self.exchange(bucket, at);
        self.agreed.set(true);
    }

    /// The error `fit` returns on this rank: an error the ranks agreed on is returned; any other
    /// (the other ranks cannot know of it and would wait) ends the whole job, naming this rank.
    pub(crate) fn fail(&self, error: Error) -> Error {
        if self.size() > 1 && !self.agreed.get() {
            self.dist.collective().abort(&format!("fit failed: {error}"));
        }
        error
    }

    /// Replaces every buffer (batch-norm running statistics) with its mean over the ranks.
    pub(crate) fn average_buffers(&self, model: &dyn Module) -> Result<()> {
        let buffers = named_buffers(model);
        if self.size() == 1 || buffers.is_empty() {
            return Ok(());
        }
        let mut flat = Vec::new();
        for (_, p) in &buffers {
            flat.extend(p.to_vec()?);
        }
        self.dist.collective().all_reduce_sum(&mut flat, "fit: all-reduce of the buffers")?;
        let scale = 1.0 / self.size() as f32;
        let mut start = 0;
        for (_, p) in &buffers {
            let n = p.tensor().numel();
            let mean: Vec<f32> = flat[start..start + n].iter().map(|v| v * scale).collect();
            p.assign(&RawTensor::from_vec(mean, p.shape(), p.tensor().device())?)?;
            start += n;
        }
        Ok(())
    }

    /// Reduces an epoch's reading over the ranks. Every rank trained on as many samples, so
    /// each mean becomes the mean of the ranks' means; per-class and confusion counts are summed
    /// and precision, recall and F1 (named after `prefix`) recomputed from the sums, since the
    /// mean of the ranks' macro scores is not the macro score over every sample.
    pub(crate) fn reduce_reading(&self, reading: &mut Reading, prefix: &str) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let mut values = Vec::new();
        flatten(&mut values, &reading.logs, 1.0, &reading.class_counts, &reading.confusion);
        self.dist.collective().all_reduce_sum(&mut values, "fit: all-reduce of the epoch's metrics")?;
        unflatten(&values, prefix, &mut reading.logs, &mut reading.class_counts, &mut reading.confusion)
    }

    /// Evaluates this rank's contiguous share of `indices` of `data`, then the reduction:
    /// every rank returns the evaluation over all of `indices`.
    pub(crate) fn evaluate<D: Dataset>(
        &self,
        model: &dyn Module,
        data: &D,
        indices: Vec<usize>,
        settings: &EvalSettings,
    ) -> Result<Evaluation> {
        // Every rank knows `indices`, so each returns this error and none waits for the others.
        if indices.len() < self.size() {
            return Err(Error::Data(format!(
                "evaluate: {} samples cannot be shared by {} ranks (each needs at least one)",
                indices.len(),
                self.size()
            )));
        }
        let mine = indices[shard_range(indices.len(), self.rank(), self.size())].to_vec();
        let local = crate::train::evaluate_dataset(model, data, Some(mine), settings)?;
        self.reduce_evaluation(local)
    }

    /// The evaluation over every rank's samples, from each rank's own: means weighted by the
    /// ranks' sample counts, counts summed, precision, recall and F1 recomputed from the sums.
    fn reduce_evaluation(&self, mut e: Evaluation) -> Result<Evaluation> {
        if self.size() == 1 {
            return Ok(e);
        }
        let n = e.samples as f32;
        let accuracy = if e.accuracy.is_nan() { 0.0 } else { e.accuracy * n };
        let mut values = vec![e.loss * n, accuracy, e.top_k_accuracy.map_or(0.0, |a| a * n)];
        flatten(&mut values, &e.metrics, n, &e.class_counts, &e.confusion_matrix);
        self.dist.collective().all_reduce_sum(&mut values, "evaluate: all-reduce of the sums")?;
        let total = values[3 + e.metrics.iter().count()];
        e.loss = values[0] / total;
        if !e.accuracy.is_nan() {
            e.accuracy = values[1] / total;
        }
        e.top_k_accuracy = e.top_k_accuracy.map(|_| values[2] / total);
        e.samples = total.round() as usize;
        unflatten(&values[3..], "", &mut e.metrics, &mut e.class_counts, &mut e.confusion_matrix)?;
        Ok(e)
    }
}

/// Appends `weight`·each value of `logs`, then `weight`, then the per-class counts and the
/// confusion counts (as f32: exact up to 2^24 per count over all ranks).
fn flatten(
    values: &mut Vec<f32>,
    logs: &Logs,
    weight: f32,
    counts: &Option<ClassCounts>,
    confusion: &Option<ConfusionMatrix>,
) {
    values.extend(logs.iter().map(|(_, v)| v * weight));
    values.push(weight);
    if let Some(c) = counts {
        for part in [c.true_positives(), c.predicted(), c.actual()] {
            values.extend(part.iter().map(|&x| x as f32));
        }
    }
    if let Some(m) = confusion {
        values.extend(m.counts().iter().map(|&x| x as f32));
    }
}

/// Reads back what [`flatten`] wrote, summed over the ranks: each value of `logs` as the
/// weighted mean, the counts as sums, and then `{prefix}precision`, `recall` and `f1` (those
/// present) recomputed from the summed counts.
fn unflatten(
    sums: &[f32],
    prefix: &str,
    logs: &mut Logs,
    counts: &mut Option<ClassCounts>,
    confusion: &mut Option<ConfusionMatrix>,
) -> Result<()> {
    let names: Vec<String> = logs.names().map(str::to_string).collect();
    let (means, rest) = sums.split_at(names.len());
    let (&total, mut rest) = rest.split_first().ok_or_else(|| Error::Data("fit: short metrics reduction".into()))?;
    for (name, v) in names.into_iter().zip(means) {
        logs.insert(name, v / total);
    }
    let mut take = |len: usize| -> Result<Vec<u64>> {
        if rest.len() < len {
            return Err(Error::Data("fit: short metrics reduction".into()));
        }
        let (head, tail) = rest.split_at(len);
        rest = tail;
        Ok(head.iter().map(|&x| x.round() as u64).collect())
    };
    if let Some(c) = counts.as_ref() {
        let k = c.classes();
        let (tp, predicted, actual) = (take(k)?, take(k)?, take(k)?);
        *counts = ClassCounts::new(tp, predicted, actual);
    }
    if let Some(m) = confusion.as_ref() {
        let k = m.classes();
        let summed = ConfusionMatrix::new(k, take(k * k)?)
            .ok_or_else(|| Error::Data("fit: short confusion reduction".into()))?;
        *confusion = Some(summed.with_labels(m.labels().iter().cloned())?);
    }
    let source = counts.clone().or_else(|| confusion.as_ref().map(ConfusionMatrix::class_counts));
    if let Some(c) = source {
        for (name, value) in [("precision", c.macro_precision()), ("recall", c.macro_recall()), ("f1", c.macro_f1())] {
            let key = format!("{prefix}{name}");
            if logs.get(&key).is_some() {
                logs.insert(key, value);
            }
        }
    }
    Ok(())
}
