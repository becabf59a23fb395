//! What `fit` does on each rank of a data-parallel job: the broadcast of the weights and the
//! optimizer state, the gradient buckets reduced during backward and their status slots, the
//! reduction of buffers, metrics and evaluations.

use std::cell::Cell;
use std::collections::HashMap;

use crate::data::Dataset;
use crate::nn::{named_buffers, named_parameters, Module, Param};
use crate::optim::Optimizer;
use crate::tensor::TensorId;
use crate::train::{ClassCounts, ConfusionMatrix, EvalSettings, Evaluation, Logs, Reading};
use crate::{Error, Gradients, RawTensor, Result};

use super::buckets::{cap_scalars, plan_buckets, DEFAULT_BUCKET_CAP_MB};
use super::optimizer_state_wire::{decode, encode};
use super::{shard_range, Distributed};

/// A rank's status slot in the gradient bucket: its step went well.
const OK: f32 = 0.0;
/// Its local gradients hold a NaN or an infinity.
const NON_FINITE: f32 = 1.0;
/// Its step failed with an error (which it reports itself).
const FAILED: f32 = 2.0;

/// The name of step `at`'s gradient reduction, for messages.
fn reduce_what((epoch, step): At) -> String {
    format!("fit: all-reduce of the gradients (epoch {}, step {})", epoch + 1, step + 1)
}

/// One bucket's gradients read back as one flat vector (one `concat` and one read-back): each
/// parameter's gradient of this batch (`grads`, already summed with `earlier`'s), else its
/// gradient from the accumulation group's `earlier` batches, else zeros.
fn read_bucket(bucket: &[&Param], grads: &[Option<RawTensor>], earlier: Option<&Gradients>) -> Result<Vec<f32>> {
    let Some(first) = bucket.first() else { return Ok(Vec::new()) };
    let _no_grad = crate::autograd::NoGradGuard::new();
    let device = first.tensor().device().clone();
    let mut flat = Vec::with_capacity(bucket.len());
    for (p, g) in bucket.iter().zip(grads) {
        let n = p.tensor().numel();
        flat.push(match g.as_ref().or_else(|| earlier.and_then(|e| e.get(p.tensor()))) {
            Some(g) => g.reshape(&[n])?,
            None => RawTensor::zeros(&[n], &device)?,
        });
    }
    let refs: Vec<&RawTensor> = flat.iter().collect();
    RawTensor::concat(&refs, 0)?.to_vec()
}

/// The data-parallel side of one `fit` run.
pub(crate) struct DataParallel {
    dist: Distributed,
    /// The most gradient scalars in one bucket.
    bucket_cap: usize,
    /// A failure every rank learnt of in a collective: each returns its error and none aborts.
    agreed: Cell<bool>,
    /// NaN or infinite gradients are no failure ([`allow_non_finite`](Self::allow_non_finite)).
    allow_non_finite: bool,
}

/// Where in training a collective happens, for messages: `(epoch, step)`, both 0-based.
pub(crate) type At = (usize, usize);

impl DataParallel {
    pub(crate) fn new(dist: Distributed) -> Self {
        DataParallel {
            dist,
            bucket_cap: cap_scalars(DEFAULT_BUCKET_CAP_MB),
            agreed: Cell::new(false),
            allow_non_finite: false,
        }
    }

    /// With a loss scaler ([`crate::train::Fit::loss_scaler`]), a rank's NaN or infinite
    /// gradients are an overflow of the scaled loss, not a failure: its status slot stays OK and
    /// the values travel in the sums, so every rank's averaged gradients are non-finite and
    /// every rank's scaler skips the step.
    pub(crate) fn allow_non_finite(mut self, allow: bool) -> Self {
        self.allow_non_finite = allow;
        self
    }

    /// Buckets of gradients of at most `mb` MiB ([`crate::train::Fit::bucket_cap_mb`]).
    pub(crate) fn bucket_cap_mb(mut self, mb: f32) -> Self {
        self.bucket_cap = cap_scalars(mb);
        self
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

    /// Rank 0's optimizer state (step counts, moments, learning rate), copied into every
    /// rank's optimizer, so resuming needs the optimizer state on rank 0 only. A fresh
    /// optimizer on rank 0 makes every rank's fresh.
    pub(crate) fn broadcast_optimizer(&self, optimizer: &mut dyn Optimizer, params: &[(String, Param)]) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let what = "fit: broadcast of rank 0's optimizer state";
        let (header_len, mut message) = if self.rank() == 0 { encode(&optimizer.state()?) } else { (0, Vec::new()) };
        // Both lengths as 16-bit halves, which f32 holds exactly.
        let halves = |n: usize| -> Result<[f32; 2]> {
            let n = u32::try_from(n).map_err(|_| Error::Training(format!("{what}: {n} values are too many")))?;
            Ok([(n >> 16) as f32, (n & 0xffff) as f32])
        };
        let [a, b] = halves(header_len)?;
        let [c, d] = halves(message.len())?;
        let mut lengths = [a, b, c, d];
        self.dist.collective().broadcast(&mut lengths, 0, what)?;
        let join = |hi: f32, lo: f32| ((hi as usize) << 16) | lo as usize;
        let (header_len, total) = (join(lengths[0], lengths[1]), join(lengths[2], lengths[3]));
        message.resize(total, 0.0);
        self.dist.collective().broadcast(&mut message, 0, what)?;
        if self.rank() != 0 {
            optimizer.load_state(&decode(header_len, &message)?, params)?;
        }
        Ok(())
    }

    /// The gradient buckets of `params`' unique trainable tensors ([`plan_buckets`] over
    /// them): each bucket's parameters, and the length of every bucket as it travels (the last
    /// one also carries one status slot per rank). A model without trainable parameters has
    /// one bucket of status slots only.
    fn buckets<'p>(&self, params: &'p [(String, Param)]) -> (Vec<Vec<&'p Param>>, Vec<usize>) {
        let unique = crate::nn::unique_trainable(params);
        let numels: Vec<usize> = unique.iter().map(|(_, p)| p.tensor().numel()).collect();
        let mut buckets: Vec<Vec<&Param>> = plan_buckets(&numels, self.bucket_cap)
            .into_iter()
            .map(|b| b.into_iter().map(|i| &unique[i].1).collect())
            .collect();
        if buckets.is_empty() {
            buckets.push(Vec::new());
        }
        let mut lens: Vec<usize> = buckets.iter().map(|b| b.iter().map(|p| p.tensor().numel()).sum()).collect();
        if let Some(last) = lens.last_mut() {
            *last += self.size();
        }
        (buckets, lens)
    }

    /// Backward from `loss` with the gradients averaged over the ranks: each bucket of
    /// gradients (`earlier`'s, from the accumulation group's earlier batches, added in) is read
    /// back once as soon as backward has finished every gradient in it, and its sum over the
    /// ranks starts while backward computes the rest; the last bucket, with this rank's status
    /// slot, after backward ends. Then every sum is divided by the number of ranks and uploaded
    /// once per bucket. A rank whose gradients are not finite (unless
    /// [`allow_non_finite`](Self::allow_non_finite)), or whose backward failed (its own error is
    /// returned), or that failed before ([`announce_failure`](Self::announce_failure)), makes
    /// this an error on every rank.
    pub(crate) fn backward_averaged(
        &self,
        params: &[(String, Param)],
        loss: &RawTensor,
        mut earlier: Option<Gradients>,
        at: At,
    ) -> Result<Gradients> {
        let (buckets, lens) = self.buckets(params);
        let last = buckets.len() - 1;
        let mut place: HashMap<TensorId, (usize, usize)> = HashMap::new();
        for (b, bucket) in buckets.iter().enumerate() {
            for (i, p) in bucket.iter().enumerate() {
                place.insert(p.tensor().id(), (b, i));
            }
        }
        let mut grads: Vec<Vec<Option<RawTensor>>> = buckets.iter().map(|b| vec![None; b.len()]).collect();
        let mut missing: Vec<usize> = buckets.iter().map(Vec::len).collect();
        let mut finite = true;
        let mut own_error = None;
        let what = reduce_what(at);
        let sums = self.dist.collective().all_reduce_sum_buckets(&lens, &what, &mut |sink| {
            let backward = crate::autograd::backward_with(loss, &mut |id, g| {
                let Some(&(b, i)) = place.get(&id) else {
                    sink.progress();
                    return Ok(());
                };
                let _no_grad = crate::autograd::NoGradGuard::new();
                let total = match earlier.as_mut().and_then(|e| e.remove(buckets[b][i].tensor())) {
                    Some(previous) => previous.add(g)?,
                    None => g.clone(),
                };
                grads[b][i] = Some(total);
                missing[b] -= 1;
                if missing[b] == 0 && b != last {
                    let values = read_bucket(&buckets[b], &grads[b], earlier.as_ref())?;
                    finite &= values.iter().all(|v| v.is_finite());
                    sink.submit(b, values)?;
                } else {
                    sink.progress();
                }
                Ok(())
            });
            let status = match backward {
                Ok(_) => {
                    // Buckets some of whose parameters got no gradient in this batch, and the last.
                    for b in (0..buckets.len()).filter(|&b| missing[b] > 0 || b == last) {
                        let mut values = read_bucket(&buckets[b], &grads[b], earlier.as_ref())?;
                        finite &= values.iter().all(|v| v.is_finite());
                        if b == last {
                            let status = if finite || self.allow_non_finite { OK } else { NON_FINITE };
                            values.extend((0..self.size()).map(|r| if r == self.rank() { status } else { OK }));
                        }
                        sink.submit(b, values)?;
                    }
                    return Ok(());
                }
                Err(e) => {
                    own_error = Some(e);
                    FAILED
                }
            };
            // Backward failed: the buckets not handed over go as zeros, with the failed slot.
            let mut values = vec![OK; lens[last]];
            values[lens[last] - self.size() + self.rank()] = status;
            sink.submit(last, values)
        });
        let sums = match (sums, own_error) {
            (Ok(sums), None) => self.check_status(sums, at)?,
            (_, Some(own)) => {
                // Every rank saw this rank's failed slot.
                self.agreed.set(true);
                return Err(own);
            }
            (Err(e), None) => return Err(e),
        };
        let _no_grad = crate::autograd::NoGradGuard::new();
        let device = params.first().map(|(_, p)| p.tensor().device().clone());
        let scale = 1.0 / self.size() as f32;
        let mut averaged = Gradients::default();
        for ((bucket, present), mut sum) in buckets.iter().zip(&grads).zip(sums) {
            let (Some(device), false) = (&device, bucket.is_empty()) else { continue };
            let total: usize = bucket.iter().map(|p| p.tensor().numel()).sum();
            sum.truncate(total);
            sum.iter_mut().for_each(|v| *v *= scale);
            let mean = RawTensor::from_vec(sum, &[total], device)?;
            let mut start = 0;
            for (p, g) in bucket.iter().zip(present) {
                let n = p.tensor().numel();
                let had = g.is_some() || earlier.as_ref().is_some_and(|e| e.get(p.tensor()).is_some());
                if had {
                    let g = mean.narrow(0, start, start + n)?.contiguous()?.reshape(p.shape())?;
                    averaged.insert(p.tensor().id(), g);
                }
                start += n;
            }
        }
        Ok(averaged)
    }

    /// `sums`, unless a rank's status slot (the last bucket's last `size` entries) is not OK:
    /// then an error naming the first such rank.
    fn check_status(&self, sums: Vec<Vec<f32>>, (epoch, step): At) -> Result<Vec<Vec<f32>>> {
        let Some(last) = sums.last() else {
            return Err(Error::Training("fit: the gradient reduction returned no bucket".into()));
        };
        let slots = &last[last.len().saturating_sub(self.size())..];
        let Some((rank, &code)) = slots.iter().enumerate().find(|(_, &s)| s != OK) else {
            return Ok(sums);
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

    /// Takes part in this step's gradient reduction (the same buckets as
    /// [`backward_averaged`](Self::backward_averaged)) with this rank's status slot set to
    /// failed, so every other rank stops with an error naming it. Called by a rank whose step
    /// failed before its backward pass; it then returns its own error. Nothing when the ranks
    /// already agreed on a failure in this step's reduction.
    pub(crate) fn announce_failure(&self, params: &[(String, Param)], at: At) {
        if self.size() == 1 || self.agreed.get() {
            return;
        }
        let (_, lens) = self.buckets(params);
        let last = lens.len() - 1;
        let _ = self.dist.collective().all_reduce_sum_buckets(&lens, &reduce_what(at), &mut |sink| {
            let mut values = vec![OK; lens[last]];
            values[lens[last] - self.size() + self.rank()] = FAILED;
            sink.submit(last, values)
        });
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
