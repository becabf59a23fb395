//! Range checks of GPU indices (class targets, embedding ids, gather indices) without a hidden
//! round trip for the indices' data.
//!
//! Every kernel that reads indices (`index.wgsl`, `cross_entropy.wgsl`) skips an index `>=` its
//! limit and records the first such position in a one-word flag buffer of the backend. Whether
//! the flag is read back depends on what the host knows about the index storage
//! ([`WgpuStorage::bound`]):
//!
//! - indices the host uploaded (or copied from uploaded ones) carry the maximum of their data, so
//!   when it is below the limit no index can be bad and nothing is read back;
//! - otherwise (a bound at or past the limit, or indices a kernel computed) the call reads the
//!   4-byte flag at once, a counted transfer, and fails with [`Error::IndexOutOfRange`] naming
//!   the first bad position and its value (read back on that error path only), like the CPU.
//!
//! So the check happens at the call, exactly as on the CPU, and costs no transfer for indices
//! that came from the host in range.

use std::sync::Mutex;

use super::encoder::Binding;
use super::storage::WgpuStorage;
use super::WgpuBackend;
use crate::{Error, Result};

/// The flag buffer and the lock that keeps one checked call's kernels and read-back together.
pub(crate) struct IndexFlag {
    buffer: ::wgpu::Buffer,
    lock: Mutex<()>,
}

impl IndexFlag {
    pub fn new(device: &::wgpu::Device) -> Self {
        let buffer = device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus index check"),
            size: 4,
            usage: super::buffer_pool::STORAGE_USAGE,
            // wgpu zero-initialises new buffers: no bad index yet.
            mapped_at_creation: false,
        });
        IndexFlag { buffer, lock: Mutex::new(()) }
    }

    /// The flag, for binding at a kernel's `bad` slot.
    pub fn binding(&self) -> Binding<'_> {
        Binding { buffer: &self.buffer, bytes: 4 }
    }
}

/// Whether the host can vouch that every index in `idx` is below `limit`.
pub(crate) fn vouched(idx: &WgpuStorage, limit: usize) -> bool {
    idx.bound().is_some_and(|b| (b as usize) < limit)
}

impl WgpuBackend {
    /// Runs `record`, which records kernels that check the indices in `idx` against `limit` into
    /// the flag, and fails with the first bad index unless the host vouches for them (see the
    /// module docs). `op` names the operation in the error.
    pub(crate) fn checked_indices<T>(
        &self,
        op: &'static str,
        idx: &WgpuStorage,
        limit: usize,
        record: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        if vouched(idx, limit) {
            return record();
        }
        let _one_at_a_time = self.index_flag.lock.lock().unwrap_or_else(|p| p.into_inner());
        let flag = &self.index_flag.buffer;
        let clear = || self.recorder.record(&self.ctx, |enc| enc.clear_buffer(flag, 0, None));
        let out = match record() {
            Ok(out) => out,
            Err(e) => {
                // Kernels recorded before the failure may still flag an index: start clean.
                clear();
                return Err(e);
            }
        };
        let word = read_word(self, flag, 0)?;
        if word == 0 {
            return Ok(out);
        }
        clear();
        let position = (u32::MAX - word) as usize;
        let index = read_word(self, idx.buffer(), position as u64 * 4)?;
        Err(Error::IndexOutOfRange { op, index: i64::from(index), limit, position })
    }
}

/// One u32 of `buffer` at byte `offset`, read back (a counted transfer).
pub(super) fn read_word(b: &WgpuBackend, buffer: &::wgpu::Buffer, offset: u64) -> Result<u32> {
    let bytes = b.recorder.read(&b.ctx, buffer, offset, 4)?;
    match <[u8; 4]>::try_from(bytes.as_slice()) {
        Ok(word) => Ok(u32::from_ne_bytes(word)),
        Err(_) => Err(Error::Gpu(format!("an index check read {} bytes, expected 4", bytes.len()))),
    }
}
