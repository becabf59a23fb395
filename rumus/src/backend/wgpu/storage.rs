//! GPU memory behind a tensor: one pooled buffer, its element count and element type.

use std::fmt;
use std::sync::Arc;

use super::pool::BufferPool;
use crate::backend::DType;

/// A storage buffer on the wgpu device. Dropping it returns the buffer to the pool.
pub struct WgpuStorage {
    buffer: Option<::wgpu::Buffer>,
    len: usize,
    dtype: DType,
    pool: Arc<BufferPool>,
}

impl WgpuStorage {
    pub(crate) fn new(buffer: ::wgpu::Buffer, len: usize, dtype: DType, pool: Arc<BufferPool>) -> Self {
        WgpuStorage { buffer: Some(buffer), len, dtype, pool }
    }

    /// The buffer. Present for the whole life of the storage (taken only in `drop`).
    pub(crate) fn buffer(&self) -> &::wgpu::Buffer {
        match &self.buffer {
            Some(b) => b,
            None => unreachable!("WgpuStorage buffer is only taken in drop"),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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
