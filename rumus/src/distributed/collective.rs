//! The collective operations data-parallel training needs, and the handle `fit` takes.

use std::fmt;
use std::rc::Rc;

use crate::data::{Dataset, SampleFor, TargetFor};
use crate::train::{EvalSettings, Evaluation};
use crate::{Error, Model, Result};

/// The operations over every process of a job that data-parallel training uses. MPI implements
/// it (`Mpi`, with the `mpi` feature); an NCCL or Gloo engine would be another
/// implementation. Every rank must call the same operations in the same order with buffers of
/// the same length.
pub trait Collective {
    /// This process's index, `0..size()`.
    fn rank(&self) -> usize;

    /// Number of processes.
    fn size(&self) -> usize;

    /// Replaces `values` with their elementwise sum over every rank. `what` names the operation
    /// for messages. An implementation waits a bounded time: when a rank does not take part
    /// (it died or hangs), it ends the whole job with a message naming the operation, rather
    /// than hang.
    fn all_reduce_sum(&self, values: &mut [f32], what: &str) -> Result<()>;

    /// Sums buckets of `lens[i]` values over every rank, overlapping the sums with the work of
    /// `fill`, which hands each bucket to the [`BucketSink`] as soon as it is ready (in any
    /// order; each once). An engine starts a bucket's sum when it and every bucket before it
    /// have been handed over, so every rank starts the same sums in the same order (index
    /// order), whatever order its buckets became ready in. Returns the sums, bucket by bucket.
    ///
    /// Buckets `fill` did not hand over are summed as zeros, so the ranks stay in step even
    /// when `fill` fails; its error is then returned after the sums. The default waits for
    /// `fill` to end and sums each bucket with [`all_reduce_sum`](Self::all_reduce_sum)
    /// (correct, without the overlap); MPI overrides it with non-blocking sums started
    /// during `fill`. Waits are bounded as in `all_reduce_sum`.
    fn all_reduce_sum_buckets(
        &self,
        lens: &[usize],
        what: &str,
        fill: &mut dyn FnMut(&mut dyn BucketSink) -> Result<()>,
    ) -> Result<Vec<Vec<f32>>> {
        let mut sink = HeldBuckets::new(lens);
        let filled = fill(&mut sink);
        let mut sums = sink.into_buckets();
        for bucket in &mut sums {
            self.all_reduce_sum(bucket, what)?;
        }
        filled.map(|()| sums)
    }

    /// Replaces `values` with rank `root`'s, on every rank (same bound as
    /// [`all_reduce_sum`](Self::all_reduce_sum)).
    fn broadcast(&self, values: &mut [f32], root: usize, what: &str) -> Result<()>;

    /// Ends every process of the job now, after printing `message` (naming this rank) to
    /// stderr. Used when a rank fails where the others cannot be told in a collective.
    fn abort(&self, message: &str) -> !;

    /// The engine, for messages, e.g. `MPI (Open MPI v4.1.4)`.
    fn name(&self) -> String;
}

/// Where [`Collective::all_reduce_sum_buckets`]'s `fill` hands over its buckets.
pub trait BucketSink {
    /// Hands over bucket `index` (`values` as long as the bucket was planned); the engine may
    /// start summing it at once. An error for an index out of range, a wrong length, or a
    /// bucket handed over twice.
    fn submit(&mut self, index: usize, values: Vec<f32>) -> Result<()>;

    /// Lets the engine advance the sums already started (MPI progresses non-blocking
    /// collectives only inside its calls); cheap, for calling between pieces of work.
    fn progress(&mut self) {}
}

/// Buckets handed over and not yet started: what [`BucketSink::submit`] checks, and the queue of
/// an engine that starts the buckets in index order.
pub(crate) struct HeldBuckets<'l> {
    lens: &'l [usize],
    held: Vec<Option<Vec<f32>>>,
    /// Buckets `..next` were taken by [`take_ready`](Self::take_ready).
    next: usize,
}

impl<'l> HeldBuckets<'l> {
    pub(crate) fn new(lens: &'l [usize]) -> Self {
        HeldBuckets { lens, held: vec![None; lens.len()], next: 0 }
    }

    /// The next bucket in index order, if it was handed over.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn take_ready(&mut self) -> Option<(usize, Vec<f32>)> {
        let values = self.held.get_mut(self.next)?.take()?;
        self.next += 1;
        Some((self.next - 1, values))
    }

    /// Every bucket not yet taken, zeros where none was handed over, in index order.
    pub(crate) fn take_rest(&mut self) -> Vec<(usize, Vec<f32>)> {
        let start = self.next;
        self.next = self.lens.len();
        (start..self.lens.len()).map(|i| (i, self.held[i].take().unwrap_or_else(|| vec![0.0; self.lens[i]]))).collect()
    }

    /// Every bucket, zeros where none was handed over.
    fn into_buckets(mut self) -> Vec<Vec<f32>> {
        self.take_rest().into_iter().map(|(_, v)| v).collect()
    }
}

impl BucketSink for HeldBuckets<'_> {
    fn submit(&mut self, index: usize, values: Vec<f32>) -> Result<()> {
        let Some(&len) = self.lens.get(index) else {
            return Err(Error::invalid("all_reduce_sum_buckets", format!("bucket {index} of {}", self.lens.len())));
        };
        if values.len() != len {
            return Err(Error::invalid(
                "all_reduce_sum_buckets",
                format!("bucket {index} has {} values, planned {len}", values.len()),
            ));
        }
        if index < self.next || self.held[index].is_some() {
            return Err(Error::invalid("all_reduce_sum_buckets", format!("bucket {index} handed over twice")));
        }
        self.held[index] = Some(values);
        Ok(())
    }
}

/// A handle to the job's [`Collective`], for [`Fit::distributed`](crate::train::Fit::distributed)
/// and [`Distributed::evaluate`]. Cheap to clone; the engine ends (MPI is finalized) when the
/// last handle is dropped, so keep one until the end of `main`.
#[derive(Clone)]
pub struct Distributed(Rc<dyn Collective>);

impl Distributed {
    /// A handle to `collective`.
    pub fn new(collective: impl Collective + 'static) -> Self {
        Distributed(Rc::new(collective))
    }

    /// One process, no communication: `fit` behaves as with one MPI rank (an incomplete last
    /// global batch dropped). For tests and code that runs with or without MPI.
    pub fn single() -> Self {
        Distributed::new(Single)
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> usize {
        self.0.rank()
    }

    /// Number of processes.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// Whether this is rank 0, the one that prints and writes files.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// The engine.
    pub fn collective(&self) -> &dyn Collective {
        &*self.0
    }

    /// `result`, except that an error in a job of several ranks ends every rank at once
    /// ([`Collective::abort`], its message naming this rank). Wrap `main`'s work in it: a rank
    /// that returns an error the others did not share (one raised before or after `fit`)
    /// would otherwise leave them waiting in a collective or in MPI's finalize until the
    /// timeout.
    pub fn abort_on_error<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Err(e) if self.size() > 1 => self.0.abort(&e.to_string()),
            other => other,
        }
    }

    /// [`evaluate`](crate::train::evaluate) sharded: each rank evaluates a contiguous
    /// `1/size` of `data`, and the sums are reduced, so every rank returns the evaluation of
    /// the whole data set.
    pub fn evaluate<M: Model, D: Dataset>(&self, model: &M, data: &D) -> Result<Evaluation>
    where
        D::Sample: SampleFor<M::Input>,
        D::Target: TargetFor<M::Output>,
    {
        let _eval = crate::nn::EvalGuard::new();
        let dp = super::DataParallel::new(self.clone());
        dp.evaluate(model, data, (0..data.len()).collect(), &EvalSettings::default())
    }
}

impl fmt::Debug for Distributed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rank {} of {}", self.0.name(), self.rank(), self.size())
    }
}

/// One process: rank 0 of 1, every collective a no-op.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_reduce_sum(&self, _: &mut [f32], _: &str) -> Result<()> {
        Ok(())
    }

    fn broadcast(&self, _: &mut [f32], _: usize, _: &str) -> Result<()> {
        Ok(())
    }

    fn abort(&self, message: &str) -> ! {
        eprintln!("rumus: {message}");
        std::process::exit(1)
    }

    fn name(&self) -> String {
        "single process".into()
    }
}
