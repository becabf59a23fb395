//! The collective operations data-parallel training needs, and the handle `fit` takes.

use std::fmt;
use std::rc::Rc;

use crate::data::{Dataset, SampleFor, TargetFor};
use crate::train::{EvalSettings, Evaluation};
use crate::{Model, Result};

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

    /// Replaces `values` with rank `root`'s, on every rank (same bound as
    /// [`all_reduce_sum`](Self::all_reduce_sum)).
    fn broadcast(&self, values: &mut [f32], root: usize, what: &str) -> Result<()>;

    /// Ends every process of the job now, after printing `message` (naming this rank) to
    /// stderr. Used when a rank fails where the others cannot be told in a collective.
    fn abort(&self, message: &str) -> !;

    /// The engine, for messages, e.g. `MPI (Open MPI v4.1.4)`.
    fn name(&self) -> String;
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
