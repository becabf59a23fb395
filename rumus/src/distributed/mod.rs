//! Data-parallel training across processes (GPUs, machines): every process (a *rank*) holds
//! the whole model, trains on its share of each global batch, and the gradients are averaged
//! over the ranks before every optimizer step, so every rank takes the same step.
//!
//! The engine is a [`Collective`]: MPI (`Mpi`, with the `mpi` feature, launched by
//! `mpirun`), or [`Distributed::single`] (one process, for tests and for code that runs either
//! way). Another engine (NCCL, Gloo) is another implementation of the trait. Hand the handle to
//! [`Fit::distributed`](crate::train::Fit::distributed):
//!
//! ```no_run
//! # #[cfg(feature = "mpi")]
//! # fn run() -> rumus::Result<()> {
//! let dist = rumus::distributed::Mpi::init()?; // keep it until the end of main
//! // ... build the model and the data on every rank, then:
//! // model.fit(&train, Fit::epochs(5).batch_size(64).distributed(&dist))?;
//! // `batch_size` is per rank: the global batch is 64 · dist.size().
//! # Ok(()) }
//! ```
//!
//! What `fit` does with it (docs/DISTRIBUTED.md has the arithmetic):
//! - rank 0's weights and buffers, and its optimizer's state (step counts, moments), are
//!   broadcast to every rank when `fit` starts, so a resumed run needs the checkpoint and the
//!   optimizer state on rank 0 only;
//! - every epoch's shuffled order is the same on every rank (same seed); it is cut into global
//!   batches of `batch_size · size` samples (an incomplete last one is dropped) and rank `r`
//!   trains on the `r`-th slice of each;
//! - the gradients travel in buckets of at most
//!   [`Fit::bucket_cap_mb`](crate::train::Fit::bucket_cap_mb) (default 25 MiB; last layers
//!   first), each read back once (on a GPU), summed over the ranks by a non-blocking all-reduce
//!   started as soon as backward has finished its gradients, while backward computes the
//!   rest; `fit` waits for every bucket, divides by the number of ranks and uploads each bucket
//!   once, before clipping and the optimizer step. A status slot per rank travels in the last
//!   bucket, so a rank whose gradients are NaN or infinite, or whose step failed, ends `fit` on
//!   every rank with an error naming it (with a
//!   [`Fit::loss_scaler`](crate::train::Fit::loss_scaler), non-finite gradients are instead
//!   averaged like any others, and every rank's scaler skips that step);
//! - buffers (batch-norm running statistics) and the epoch's metrics are averaged at each
//!   epoch's end; validation is sharded and its sums reduced;
//! - only rank 0 prints progress, and only rank 0 writes files through rumus's savers
//!   ([`crate::io::writes_files`]).

mod buckets;
mod collective;
mod data_parallel;
#[cfg(feature = "mpi")]
mod mpi;
mod optimizer_state_wire;
mod shard;

pub use collective::{BucketSink, Collective, Distributed, Single};
pub(crate) use data_parallel::DataParallel;
#[cfg(feature = "mpi")]
pub use mpi::Mpi;
pub(crate) use shard::{shard_global_batches, shard_range};
