//! Size-class pool of storage buffers. Freed tensors return their buffer here and the next
//! allocation of the same class takes it back, so a training loop stops allocating after its
//! first step. Reuse inside one pending command encoder is safe: commands run in record order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::{Error, Result};

/// Idle bytes kept for reuse: at least this, and up to the largest working set seen (see
/// `BufferPool::release`); buffers freed beyond that are released to the driver.
const IDLE_FLOOR: u64 = 1 << 30;
/// Smallest class, in bytes.
const MIN_CLASS: u64 = 256;

pub(crate) const STORAGE_USAGE: ::wgpu::BufferUsages =
    ::wgpu::BufferUsages::STORAGE.union(::wgpu::BufferUsages::COPY_SRC).union(::wgpu::BufferUsages::COPY_DST);

/// Rounds `bytes` up to a class: powers of two split in quarter steps, so at most 25% is wasted.
pub(crate) fn size_class(bytes: u64) -> u64 {
    if bytes <= MIN_CLASS {
        return MIN_CLASS;
    }
    let pow = bytes.next_power_of_two();
    let quarter = pow / 8; // steps of pow/8 between pow/2 and pow
    bytes.div_ceil(quarter) * quarter
}

#[derive(Default)]
struct Idle {
    by_class: HashMap<u64, Vec<::wgpu::Buffer>>,
    bytes: u64,
}

pub(crate) struct BufferPool {
    idle: Mutex<Idle>,
    /// Buffers handed out by `acquire` and not yet given back (the live tensors' buffers).
    live: AtomicUsize,
    /// Their bytes, and the most there have been since the last `reset_peak`.
    live_bytes: AtomicU64,
    peak_live_bytes: AtomicU64,
    /// The most live bytes ever (never reset): the idle bound grows to it.
    most_live_bytes: AtomicU64,
}

/// Buffer counts of a wgpu device's pool, for tests that check memory stays bounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers owned by live tensors.
    pub live_buffers: usize,
    /// Buffers kept idle for reuse.
    pub idle_buffers: usize,
    /// Bytes of the idle buffers.
    pub idle_bytes: u64,
    /// Bytes of the live buffers (size classes, so up to 25% above the tensors' own sizes).
    pub live_bytes: u64,
    /// The most live bytes since the pool was created or `reset_peak` was called: the
    /// counterpart of PyTorch's `torch.cuda.max_memory_allocated`.
    pub peak_live_bytes: u64,
}

impl BufferPool {
    pub fn new() -> Self {
        BufferPool {
            idle: Mutex::new(Idle::default()),
            live: AtomicUsize::new(0),
            live_bytes: AtomicU64::new(0),
            peak_live_bytes: AtomicU64::new(0),
            most_live_bytes: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> PoolStats {
        let idle = self.lock();
        PoolStats {
            live_buffers: self.live.load(Ordering::Relaxed),
            idle_buffers: idle.by_class.values().map(Vec::len).sum(),
            idle_bytes: idle.bytes,
            live_bytes: self.live_bytes.load(Ordering::Relaxed),
            peak_live_bytes: self.peak_live_bytes.load(Ordering::Relaxed),
        }
    }

    /// Starts a new peak measurement from the bytes live now.
    pub fn reset_peak(&self) {
        self.peak_live_bytes.store(self.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A storage buffer of at least `bytes` bytes (contents undefined).
    pub fn acquire(
        &self,
        device: &::wgpu::Device,
        limits: &::wgpu::Limits,
        bytes: u64,
        op: &str,
    ) -> Result<::wgpu::Buffer> {
        let buffer = self.acquire_untracked(device, limits, bytes, op)?;
        self.live.fetch_add(1, Ordering::Relaxed);
        let live = self.live_bytes.fetch_add(buffer.size(), Ordering::Relaxed) + buffer.size();
        self.peak_live_bytes.fetch_max(live, Ordering::Relaxed);
        self.most_live_bytes.fetch_max(live, Ordering::Relaxed);
        Ok(buffer)
    }

    fn acquire_untracked(
        &self,
        device: &::wgpu::Device,
        limits: &::wgpu::Limits,
        bytes: u64,
        op: &str,
    ) -> Result<::wgpu::Buffer> {
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        if bytes > max_binding {
            return Err(Error::Gpu(format!(
                "{op}: a buffer of {bytes} bytes exceeds this adapter's largest storage binding \
                 ({max_binding} bytes); use smaller tensors or the CPU device"
            )));
        }
        let class = size_class(bytes).min(limits.max_buffer_size).max(bytes);
        {
            let mut idle = self.lock();
            if let Some(buffer) = idle.by_class.get_mut(&class).and_then(|v| v.pop()) {
                idle.bytes -= class;
                return Ok(buffer);
            }
        }
        let scope = device.push_error_scope(::wgpu::ErrorFilter::OutOfMemory);
        let buffer = device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus tensor"),
            size: class,
            usage: STORAGE_USAGE,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            // Release idle memory and try once more before giving up.
            self.trim();
            let retry = device.push_error_scope(::wgpu::ErrorFilter::OutOfMemory);
            let buffer = device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("rumus tensor"),
                size: class,
                usage: STORAGE_USAGE,
                mapped_at_creation: false,
            });
            if pollster::block_on(retry.pop()).is_some() {
                return Err(Error::Gpu(format!("{op}: out of GPU memory allocating {bytes} bytes ({e})")));
            }
            return Ok(buffer);
        }
        Ok(buffer)
    }

    /// Takes back a buffer whose tensor was dropped.
    pub fn release(&self, buffer: ::wgpu::Buffer) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        let class = buffer.size();
        self.live_bytes.fetch_sub(class, Ordering::Relaxed);
        // Keeping as much idle as the largest working set lets a loop whose temporaries pass
        // the floor stop allocating too (under a fixed bound, a loop freeing more than it per
        // iteration spends most of its time re-creating buffers; BENCHMARKS.md). Live plus
        // idle stays under twice the largest working set.
        let bound = IDLE_FLOOR.max(self.most_live_bytes.load(Ordering::Relaxed));
        let mut idle = self.lock();
        if idle.bytes + class > bound {
            return; // dropped: the driver frees it once pending commands are done
        }
        idle.bytes += class;
        idle.by_class.entry(class).or_default().push(buffer);
    }

    /// Drops every idle buffer.
    pub fn trim(&self) {
        let mut idle = self.lock();
        idle.by_class.clear();
        idle.bytes = 0;
    }

    /// Bytes held idle for reuse.
    pub fn idle_bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn classes_round_up_by_at_most_a_quarter() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 320);
        assert_eq!(size_class(1024), 1024);
        assert_eq!(size_class(1025), 1280);
        for bytes in [300u64, 5000, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let c = size_class(bytes);
            assert!(c >= bytes && c <= bytes + bytes / 4 + 256, "{bytes} -> {c}");
        }
    }
}
