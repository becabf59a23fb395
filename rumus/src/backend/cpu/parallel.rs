//! When CPU kernels split work across threads.

/// Below this many elements a kernel runs on the calling thread: spawning costs more.
pub const PAR_THRESHOLD: usize = 1 << 15;
