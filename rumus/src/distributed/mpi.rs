//! MPI as the [`Collective`] (the `mpi` feature): rsmpi over the system's MPI library. Every
//! collective is non-blocking (`MPI_Iallreduce`, `MPI_Ibcast`) and polled against a deadline,
//! so a rank that died or hangs ends the job with a message instead of a hang.

use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::collective::HeldBuckets;
use super::{BucketSink, Collective, Distributed};
use crate::{Error, Result};

/// How long a collective may wait for the other ranks, in seconds (default 300).
const TIMEOUT_ENV: &str = "RUMUS_MPI_TIMEOUT";

/// The default of [`TIMEOUT_ENV`]: long enough for a slow rank's validation or checkpoint.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The MPI job this process belongs to (launched by `mpirun`/`srun`; a process started alone
/// is a job of one). MPI is finalized when the last [`Distributed`] handle is dropped.
pub struct Mpi {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    timeout: Duration,
    // Dropped last: finalizes MPI.
    _universe: Universe,
}

impl Mpi {
    /// Initializes MPI and returns the handle `fit` takes. Ranks other than 0 stop writing
    /// files ([`crate::io::writes_files`]). An error when MPI was already initialized in this
    /// process, or when `RUMUS_MPI_TIMEOUT` is not a positive number of seconds.
    pub fn init() -> Result<Distributed> {
        let timeout = match std::env::var(TIMEOUT_ENV) {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s),
                _ => {
                    return Err(Error::invalid(
                        "Mpi::init",
                        format!("{TIMEOUT_ENV}={v:?} is not a positive number of seconds"),
                    ))
                }
            },
            _ => DEFAULT_TIMEOUT,
        };
        let universe = mpi::initialize()
            .ok_or_else(|| Error::invalid("Mpi::init", "MPI is already initialized in this process"))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        crate::io::set_writes_files(rank == 0);
        Ok(Distributed::new(Mpi { world, rank, size, timeout, _universe: universe }))
    }

    /// Polls `request` until it completes; past the deadline, ends the job naming `what`.
    fn wait<'a, D: ?Sized>(
        &self,
        mut request: mpi::request::Request<'a, D, &'_ mpi::request::LocalScope<'a>>,
        what: &str,
    ) {
        let start = Instant::now();
        loop {
            match request.test() {
                Ok(_) => return,
                Err(pending) => request = pending,
            }
            let waited = start.elapsed();
            if waited > self.timeout {
                self.abort(&format!(
                    "{what}: no answer from every rank within {:.0} s ({TIMEOUT_ENV}); a rank died, \
                     hangs or left the training loop early",
                    self.timeout.as_secs_f64()
                ));
            }
            // Spin briefly (a step's reduce is usually quick), then sleep so a waiting rank
            // leaves the cores to the others.
            if waited < Duration::from_millis(2) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

/// The bucket sums of one [`Collective::all_reduce_sum_buckets`]: each bucket's
/// `MPI_Iallreduce` starts as soon as it and every earlier bucket were handed over.
struct Overlap<'a, 's> {
    mpi: &'s Mpi,
    scope: &'s mpi::request::LocalScope<'a>,
    held: HeldBuckets<'s>,
    /// Each bucket's send and sum buffers, in index order, lent to MPI as they start.
    buffers: Box<dyn Iterator<Item = (&'a mut Vec<f32>, &'a mut Vec<f32>)> + 'a>,
    /// The sums started and not yet seen complete.
    started: Vec<mpi::request::Request<'a, [f32], &'s mpi::request::LocalScope<'a>>>,
}

impl<'a, 's> Overlap<'a, 's> {
    /// Starts the next bucket's sum with `values`.
    fn start(&mut self, values: Vec<f32>) {
        let Some((send, sum)) = self.buffers.next() else { return };
        *send = values;
        let send: &'a Vec<f32> = send;
        let request =
            self.mpi.world.immediate_all_reduce_into(self.scope, &send[..], &mut sum[..], SystemOperation::sum());
        self.started.push(request);
    }

    /// Tests every started sum once (which lets MPI advance them), keeping those not done.
    fn test_all(&mut self) {
        let started = std::mem::take(&mut self.started);
        for request in started {
            if let Err(pending) = request.test() {
                self.started.push(pending);
            }
        }
    }

    /// Waits for every started sum; past the deadline, ends the job naming `what`.
    fn wait_all(mut self, what: &str) {
        for request in std::mem::take(&mut self.started) {
            self.mpi.wait(request, what);
        }
    }
}

impl BucketSink for Overlap<'_, '_> {
    fn submit(&mut self, index: usize, values: Vec<f32>) -> Result<()> {
        self.held.submit(index, values)?;
        while let Some((_, values)) = self.held.take_ready() {
            self.start(values);
        }
        self.test_all();
        Ok(())
    }

    fn progress(&mut self) {
        if !self.started.is_empty() {
            self.test_all();
        }
    }
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce_sum(&self, values: &mut [f32], what: &str) -> Result<()> {
        if self.size == 1 {
            return Ok(());
        }
        let send = values.to_vec();
        mpi::request::scope(|scope| {
            let request = self.world.immediate_all_reduce_into(scope, &send[..], values, SystemOperation::sum());
            self.wait(request, what);
        });
        Ok(())
    }

    fn all_reduce_sum_buckets(
        &self,
        lens: &[usize],
        what: &str,
        fill: &mut dyn FnMut(&mut dyn BucketSink) -> Result<()>,
    ) -> Result<Vec<Vec<f32>>> {
        // Declared outside the scope: MPI reads and writes them until the requests complete.
        let mut sends: Vec<Vec<f32>> = vec![Vec::new(); lens.len()];
        let mut sums: Vec<Vec<f32>> = lens.iter().map(|&n| vec![0.0; n]).collect();
        let filled = mpi::request::scope(|scope| {
            let mut overlap = Overlap {
                mpi: self,
                scope,
                held: HeldBuckets::new(lens),
                buffers: Box::new(sends.iter_mut().zip(sums.iter_mut())),
                started: Vec::new(),
            };
            let filled = fill(&mut overlap);
            for (_, values) in overlap.held.take_rest() {
                overlap.start(values);
            }
            overlap.wait_all(what);
            filled
        });
        filled.map(|()| sums)
    }

    fn broadcast(&self, values: &mut [f32], root: usize, what: &str) -> Result<()> {
        if root >= self.size {
            return Err(Error::invalid("broadcast", format!("{what}: from rank {root} of {}", self.size)));
        }
        if self.size == 1 {
            return Ok(());
        }
        let root = self.world.process_at_rank(root as i32);
        mpi::request::scope(|scope| {
            let request = root.immediate_broadcast_into(scope, values);
            self.wait(request, what);
        });
        Ok(())
    }

    fn abort(&self, message: &str) -> ! {
        eprintln!("rumus: rank {} of {}: {message}; ending every rank (MPI_Abort)", self.rank, self.size);
        self.world.abort(1)
    }

    fn name(&self) -> String {
        let library = mpi::environment::library_version().unwrap_or_default();
        let first = library.lines().next().unwrap_or("").trim().trim_end_matches(',').to_string();
        if first.is_empty() {
            "MPI".into()
        } else {
            format!("MPI ({first})")
        }
    }
}
