//! What `fit` does on each rank of a data-parallel job: the weight broadcast, the gradient
//! bucket and its status slots, the reduction of buffers, metrics and evaluations.

use std::cell::Cell;

use crate::data::Dataset;
use crate::nn::{named_buffers, named_parameters, Module, Param};
use crate::train::{EvalSettings, Evaluation, Logs};
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

    /// Replaces every value of `logs` with its mean over the ranks (every rank trained on as
    /// many samples, so the mean of the means is the mean over every sample).
    pub(crate) fn average_logs(&self, logs: &mut Logs) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let names: Vec<String> = logs.names().map(str::to_string).collect();
        let mut values: Vec<f32> = logs.iter().map(|(_, v)| v).collect();
        self.dist.collective().all_reduce_sum(&mut values, "fit: all-reduce of the epoch's metrics")?;
        for (name, v) in names.into_iter().zip(values) {
            logs.insert(name, v / self.size() as f32);
        }
        Ok(())
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
        let part = shard_range(indices.len(), self.rank(), self.size());
        let local = if part.is_empty() {
            None
        } else {
            let mine = indices[part].to_vec();
            Some(crate::train::evaluate_dataset(model, data, Some(mine), settings)?)
        };
        self.reduce_evaluation(local)
    }

    /// The evaluation over every rank's samples, from each rank's own (`None`: it had none).
    fn reduce_evaluation(&self, local: Option<Evaluation>) -> Result<Evaluation> {
        let mut sums = match &local {
            Some(e) => {
                let n = e.samples as f32;
                let acc = if e.accuracy.is_nan() { [0.0, 0.0] } else { [e.accuracy * n, 1.0] };
                let top = e.top_k_accuracy.map_or([0.0, 0.0], |a| [a * n, 1.0]);
                vec![e.loss * n, acc[0], acc[1], top[0], top[1], n]
            }
            None => vec![0.0; 6],
        };
        if self.size() > 1 {
            self.dist.collective().all_reduce_sum(&mut sums, "evaluate: all-reduce of the sums")?;
        }
        let n = sums[5];
        if n == 0.0 {
            return Err(Error::Data("evaluate: the dataset has no samples".into()));
        }
        Ok(Evaluation {
            loss: sums[0] / n,
            accuracy: if sums[2] > 0.0 { sums[1] / n } else { f32::NAN },
            top_k_accuracy: (sums[4] > 0.0).then(|| sums[3] / n),
            samples: n as usize,
        })
    }
}
