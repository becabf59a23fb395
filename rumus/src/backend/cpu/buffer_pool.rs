//! A bounded cache of large f32 buffers. A training step allocates the same sizes every step;
//! handing freed buffers back to the next op of that size skips the allocator's mmap/munmap
//! round trip and the page faults of touching fresh pages, which cost a third of a LeNet step.
//!
//! Pooled buffers hold stale but initialised values, so kernels that overwrite every element can
//! take one without clearing it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::{Error, Result};

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

/// `len` zero elements from the allocator, or `Error::OutOfMemory` naming `op` when it cannot
/// provide them or they exceed [`max_buffer_bytes`]: every host buffer of the CPU backend is
/// allocated here, so a huge request is an error, never an abort.
pub fn zeroed<T: bytemuck::Zeroable>(op: &'static str, len: usize) -> Result<Vec<T>> {
    let elem = std::mem::size_of::<T>();
    if len == 0 || elem == 0 {
        return Ok(std::iter::repeat_with(T::zeroed).take(len).collect());
    }
    let refused = |why: &str| Error::out_of_memory(op, len, elem, format!("{len} elements: {why}"));
    if len as u128 * elem as u128 > max_buffer_bytes() {
        let limit = max_buffer_bytes();
        return Err(refused(&format!("more than the machine's {limit} bytes of physical memory")));
    }
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| refused("beyond the address space"))?;
    // SAFETY: `layout` has a non-zero size (len > 0 and T is not zero-sized).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(refused("the allocator refused"));
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of exactly `len` Ts (so
    // capacity `len`), and all-zero bytes are a valid T (`Zeroable`), so all `len` are initialised.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// The largest single host buffer the CPU backend allocates: the machine's physical memory.
/// A larger buffer could only be had by overcommitting, and the process would be killed when it
/// touched the pages.
pub fn max_buffer_bytes() -> u128 {
    static LIMIT: OnceLock<u128> = OnceLock::new();
    *LIMIT.get_or_init(physical_memory)
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn physical_memory() -> u128 {
    // SAFETY: sysconf only reads system configuration values; it has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages > 0 && page > 0 {
        pages as u128 * page as u128
    } else {
        u128::MAX
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn physical_memory() -> u128 {
    u128::MAX
}

/// `len` copies of `value`, fallibly (see [`zeroed`]).
pub fn filled_with<T: bytemuck::Zeroable + Copy>(op: &'static str, len: usize, value: T) -> Result<Vec<T>> {
    let mut buffer = zeroed(op, len)?;
    buffer.fill(value);
    Ok(buffer)
}

/// A fallible copy of `data` (see [`zeroed`]).
pub fn copied<T: bytemuck::Zeroable + Copy>(op: &'static str, data: &[T]) -> Result<Vec<T>> {
    let mut buffer = zeroed(op, data.len())?;
    buffer.copy_from_slice(data);
    Ok(buffer)
}

/// A buffer of `len` elements with unspecified (but initialised) contents, or `OutOfMemory`.
pub fn take(op: &'static str, len: usize) -> Result<Vec<f32>> {
    match reuse(len) {
        Some(buffer) => Ok(buffer),
        None => zeroed(op, len),
    }
}

/// A pooled buffer of exactly `len` elements, if one is free.
fn reuse(len: usize) -> Option<Vec<f32>> {
    if len < MIN_POOLED_LEN {
        return None;
    }
    with_pool(|pool| {
        let buffer = pool.by_len.get_mut(&len)?.pop()?;
        pool.bytes -= len * 4;
        Some(buffer)
    })
}

/// A buffer of `len` copies of `value`, or `OutOfMemory`. Fresh zeros are not written again
/// (the allocator's pages are zero until touched).
pub fn filled(op: &'static str, len: usize, value: f32) -> Result<Vec<f32>> {
    match reuse(len) {
        Some(mut buffer) => {
            buffer.fill(value);
            Ok(buffer)
        }
        None if value.to_bits() == 0 => zeroed(op, len),
        None => filled_with(op, len, value),
    }
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
        let buffer = filled("test", len, 2.0).unwrap();
        let address = buffer.as_ptr();
        give_back(buffer);
        let again = take("test", len).unwrap();
        assert_eq!(again.as_ptr(), address);
        assert_eq!(again.len(), len);
        give_back(again);
        for _ in 0..(MAX_POOLED_BYTES / (len * 4) + 10) {
            give_back(vec![0.0; len]);
        }
        assert!(pooled_bytes() <= MAX_POOLED_BYTES);
    }

    #[test]
    fn impossible_buffers_are_errors_naming_the_op_and_bytes() {
        for len in [1usize << 62, usize::MAX / 2, usize::MAX] {
            let err = take("zeros", len).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::OutOfMemory { op: "zeros", .. }), "{text}");
            assert!(text.contains(&(len as u128 * 4).to_string()), "{text}");
        }
        assert!(zeroed::<u32>("to_vec", 1 << 62).is_err());
        assert_eq!(filled_with("t", 3, 7u32).unwrap(), vec![7, 7, 7]);
        assert_eq!(copied("t", &[1.0f32, 2.0]).unwrap(), vec![1.0, 2.0]);
        assert!(zeroed::<f32>("t", 0).unwrap().is_empty());
        let beyond = ((max_buffer_bytes() / 4).min(usize::MAX as u128) as usize).saturating_add(1);
        let err = zeroed::<f32>("zeros", beyond).unwrap_err();
        assert!(err.to_string().contains("physical memory") || max_buffer_bytes() > usize::MAX as u128, "{err}");
    }
}
