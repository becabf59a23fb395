//! Whether this process writes files: in a data-parallel job only rank 0 does, so the ranks
//! of a job on one host (or on a shared file system) never write one file together.

use std::sync::atomic::{AtomicBool, Ordering};

static WRITES: AtomicBool = AtomicBool::new(true);

/// Whether rumus's savers write files in this process: true, except on the ranks other than 0
/// of a distributed job (set by `distributed::Mpi::init`). Where it is false,
/// [`write_atomic`](super::write_atomic) and [`write_atomic_with`](super::write_atomic_with),
/// and with them checkpoints, optimizer states, `History::save_*` and `History::plot`, and
/// `CsvLogger`, succeed without writing. Data downloads are written by every process.
pub fn writes_files() -> bool {
    WRITES.load(Ordering::Relaxed)
}

/// Sets [`writes_files`].
#[cfg(feature = "mpi")]
pub(crate) fn set_writes_files(writes: bool) {
    WRITES.store(writes, Ordering::Relaxed);
}
