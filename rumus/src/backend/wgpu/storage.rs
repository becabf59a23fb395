//! GPU memory behind a tensor: one pooled buffer, its element count and element type, and for
//! u32 storages the largest value the host can vouch for (see [`WgpuStorage::bound`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer_pool::BufferPool;
use crate::backend::DType;

/// A storage buffer on the wgpu device. Dropping it returns the buffer to the pool.
pub struct WgpuStorage {
    buffer: Option<::wgpu::Buffer>,
    len: usize,
    dtype: DType,
    pool: Arc<BufferPool>,
    /// `UNKNOWN`, or an upper bound on every u32 value in the buffer.
    bound: AtomicU64,
}

const UNKNOWN: u64 = u64::MAX;

impl WgpuStorage {
    pub(crate) fn new(buffer: ::wgpu::Buffer, len: usize, dtype: DType, pool: Arc<BufferPool>) -> Self {
        WgpuStorage { buffer: Some(buffer), len, dtype, pool, bound: AtomicU64::new(UNKNOWN) }
    }

    /// Whether this storage was allocated by the backend owning `pool`.
    pub(crate) fn belongs_to(&self, pool: &Arc<BufferPool>) -> bool {
        Arc::ptr_eq(&self.pool, pool)
    }

    /// An upper bound on every value of this u32 storage that the host knows without reading
    /// the buffer (the maximum of uploaded data, carried through copies), or `None` when a
    /// kernel wrote values the host has not seen. Index kernels use it to skip reading back
    /// their out-of-range flag (see `index_check.rs`).
    pub(crate) fn bound(&self) -> Option<u32> {
        u32::try_from(self.bound.load(Ordering::Acquire)).ok()
    }

    pub(crate) fn set_bound(&self, bound: Option<u32>) {
        self.bound.store(bound.map_or(UNKNOWN, u64::from), Ordering::Release);
    }

    /// The buffer. Present for the whole life of the storage (taken only in `drop`).
    pub(crate) fn buffer(&self) -> &::wgpu::Buffer {
        match &self.buffer {
            Some(b) => b,
            None => unreachable!("WgpuStorage buffer is only taken in drop"),
        }
    }

    /// Number of elements (each 4 bytes), not the buffer's size, which may be larger.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no element is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element type of the buffer's contents.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes the elements occupy.
    pub(crate) fn bytes(&self) -> u64 {
        self.len as u64 * 4
    }
}

impl Drop for WgpuStorage {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.release(buffer);
        }
    }
}

impl fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WgpuStorage({} x {})", self.len, self.dtype.name())
    }
}
