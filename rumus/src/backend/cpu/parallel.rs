//! When CPU kernels split work across threads.

/// Below this many elements a kernel runs on the calling thread: spawning costs more.
pub const PAR_THRESHOLD: usize = 1 << 15;

/// Chunk length that gives every rayon thread a few pieces of `len` elements.
pub fn chunk_len(len: usize) -> usize {
    let pieces = rayon::current_num_threads().max(1) * 4;
    len.div_ceil(pieces).max(4096)
}
