//! A bounded cache of large f32 buffers. A training step allocates the same sizes every step;
//! handing freed buffers back to the next op of that size skips the allocator's mmap/munmap
//! round trip and the page faults of touching fresh pages, which cost a third of a LeNet step.
//!
//! Pooled buffers hold stale but initialised values, so kernels that overwrite every element can
//! take one without clearing it.

use std::collections::HashMap;
use std::sync::Mutex;

/// Buffers smaller than this (in elements) go straight to the allocator, which is fast for them.
const MIN_POOLED_LEN: usize = 1 << 14;
/// Upper bound of the bytes kept for reuse; beyond it freed buffers are released.
const MAX_POOLED_BYTES: usize = 512 << 20;

#[derive(Default)]
struct Pool {
    by_len: HashMap<usize, Vec<Vec<f32>>>,
    bytes: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn with_pool<T>(f: impl FnOnce(&mut Pool) -> T) -> T {
    let mut guard = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(guard.get_or_insert_with(Pool::default))
}

/// A buffer of `len` elements with unspecified (but initialised) contents.
pub fn take(len: usize) -> Vec<f32> {
    if len >= MIN_POOLED_LEN {
        let reused = with_pool(|pool| {
            let buffer = pool.by_len.get_mut(&len)?.pop()?;
            pool.bytes -= len * 4;
            Some(buffer)
        });
        if let Some(buffer) = reused {
            return buffer;
        }
    }
    vec![0.0; len]
}

/// A buffer of `len` copies of `value`.
pub fn filled(len: usize, value: f32) -> Vec<f32> {
    let mut buffer = take(len);
    buffer.fill(value);
    buffer
}

/// Returns a buffer for reuse (dropped instead when the pool is full or it is small).
pub fn give_back(buffer: Vec<f32>) {
    let len = buffer.len();
    if len < MIN_POOLED_LEN || buffer.capacity() != len {
        return;
    }
    with_pool(|pool| {
        if pool.bytes + len * 4 <= MAX_POOLED_BYTES {
            pool.bytes += len * 4;
            pool.by_len.entry(len).or_default().push(buffer);
        }
    });
}

/// Bytes currently held for reuse (for tests that check the pool stays bounded).
pub fn pooled_bytes() -> usize {
    with_pool(|pool| pool.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_the_pool_is_bounded() {
        let len = MIN_POOLED_LEN * 3 + 1;
        let buffer = filled(len, 2.0);
        let address = buffer.as_ptr();
        give_back(buffer);
        let again = take(len);
        assert_eq!(again.as_ptr(), address);
        assert_eq!(again.len(), len);
        give_back(again);
        for _ in 0..(MAX_POOLED_BYTES / (len * 4) + 10) {
            give_back(vec![0.0; len]);
        }
        assert!(pooled_bytes() <= MAX_POOLED_BYTES);
    }
}
