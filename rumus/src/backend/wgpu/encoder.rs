//! Records kernels into one shared command encoder and submits at sync points: a readback, or
//! every `MAX_PENDING` dispatches. Per-dispatch parameters go into a host arena that is written
//! to one reusable uniform buffer right before each submit, so no dispatch allocates a buffer.
//! Consecutive dispatches share one compute pass (wgpu still places a barrier between them),
//! ended only by a copy, a clear or the submit: a pass per dispatch cost the host a pass's
//! begin, end and state tracking each time (issue #32, docs/BENCHMARKS.md). Readbacks reuse
//! their staging buffers instead of creating one per read. Waits for the GPU poll before they
//! block (`RUMUS_WGPU_SPIN_US`, on GPUs only by default), so a sync point is seen when it happens.

use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::buffer_pool::size_class;
use super::context::WgpuContext;
use super::pipelines::Kernel;
use super::profiler::KernelProfile;
use crate::{Error, Result};

/// Dispatches recorded before a submit. Large enough to amortise submit cost, small enough that
/// the GPU starts working while the host is still recording.
const MAX_PENDING: usize = 256;
/// After a wait for the GPU (a read-back, `synchronize`) the GPU is idle: the first submit comes
/// after this many dispatches and each later one after twice as many as the one before, up to
/// `MAX_PENDING`. A training step that ends in a read-back (its loss) so keeps the GPU busy from
/// its first kernels instead of idling until the host has recorded `MAX_PENDING` of them
/// (issue #32: a ResNet-18 step records about 400).
const FIRST_SUBMIT: usize = 32;
/// Submissions the host may run ahead of the GPU before it waits for the oldest, so a loop
/// that never reads back cannot queue unbounded work (and memory).
const MAX_IN_FLIGHT: usize = 4;
/// Upload bytes staged in the pending encoder before it is submitted, bounding staging memory.
const MAX_PENDING_UPLOAD: u64 = 64 << 20;
/// Bytes of one parameter slot; every kernel's `Params` struct fits.
pub(crate) const PARAM_BYTES: usize = 256;
/// Readback staging buffers kept for reuse, and the largest kept: a small read (a loss, a
/// flag, one element) is the sync point of most loops, and creating its mappable buffer each
/// time cost more than the copy.
const STAGING_KEPT: usize = 4;
const STAGING_KEPT_BYTES: u64 = 16 << 20;
/// Bindings a kernel's bind group is built from without an allocation (its parameters and up to
/// 15 buffers); the optimizer's many-parameter kernels bind more, from a `Vec`.
const FIXED_BINDINGS: usize = 16;

/// How long a wait for the GPU polls before it blocks, in microseconds.
const SPIN_ENV: &str = "RUMUS_WGPU_SPIN_US";
/// The default on a GPU: a sync point after a short kernel is seen at once; a long one costs a
/// core this long before the thread sleeps. Software adapters (lavapipe) get 0: there the GPU's
/// work runs on the same cores the spin would take.
const SPIN_DEFAULT_US: u64 = 1000;

/// The spin of waits: `RUMUS_WGPU_SPIN_US` (microseconds; 0 blocks at once) when set and a
/// number, else `SPIN_DEFAULT_US` on hardware adapters and 0 on software ones. A value that is
/// not a number is reported on stderr and the default kept.
fn spin_default(hardware: bool, env: Option<&str>) -> Duration {
    let default = if hardware { SPIN_DEFAULT_US } else { 0 };
    let micros = match env.map(str::trim) {
        None | Some("") => default,
        Some(v) => v.parse::<u64>().unwrap_or_else(|_| {
            eprintln!("rumus: {SPIN_ENV}={v:?} is not a number of microseconds; using {default}");
            default
        }),
    };
    Duration::from_micros(micros)
}

static TRANSFERS: AtomicU64 = AtomicU64::new(0);

/// Device → host transfers so far (every `to_f32`/`to_u32` on a wgpu tensor counts one, and so
/// does each read of an index check's flag: only for indices the host cannot vouch for).
pub fn transfer_count() -> u64 {
    TRANSFERS.load(Ordering::Relaxed)
}

struct Pending {
    /// The open compute pass: it holds the encoder locked, so every other command ends it first.
    pass: Option<::wgpu::ComputePass<'static>>,
    encoder: Option<::wgpu::CommandEncoder>,
    params: Vec<u8>,
    dispatches: usize,
    /// Dispatches this encoder takes before it is submitted (`FIRST_SUBMIT` doubling up to
    /// `MAX_PENDING`).
    limit: usize,
    upload_bytes: u64,
    in_flight: VecDeque<::wgpu::SubmissionIndex>,
    /// Per-kernel GPU timing while `WgpuBackend::profile_kernels` runs (a pass per dispatch).
    profile: Option<KernelProfile>,
}

pub(crate) struct Recorder {
    pending: Mutex<Pending>,
    params_buffer: ::wgpu::Buffer,
    slot: usize,
    /// Idle readback staging buffers (locked alone, never while `pending` is held).
    staging: Mutex<Vec<::wgpu::Buffer>>,
    /// How long a wait polls before it blocks (`spin_default`).
    spin: Duration,
}

/// One buffer binding: the buffer and how many bytes of it the kernel sees.
pub(crate) struct Binding<'a> {
    pub buffer: &'a ::wgpu::Buffer,
    pub bytes: u64,
}

impl Recorder {
    pub fn new(ctx: &WgpuContext) -> Self {
        let slot = PARAM_BYTES.max(ctx.limits.min_uniform_buffer_offset_alignment as usize);
        let params_buffer = ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus kernel params"),
            size: (slot * MAX_PENDING) as u64,
            usage: ::wgpu::BufferUsages::UNIFORM | ::wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder {
            pending: Mutex::new(Pending {
                pass: None,
                encoder: None,
                params: vec![0; slot * MAX_PENDING],
                dispatches: 0,
                limit: FIRST_SUBMIT,
                upload_bytes: 0,
                in_flight: VecDeque::new(),
                profile: None,
            }),
            params_buffer,
            slot,
            staging: Mutex::new(Vec::new()),
            spin: spin_default(ctx.is_hardware(), std::env::var(SPIN_ENV).ok().as_deref()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pending encoder, created on first use, with any open compute pass ended.
    fn encoder<'a>(ctx: &WgpuContext, pending: &'a mut Pending) -> &'a mut ::wgpu::CommandEncoder {
        pending.pass = None;
        pending.encoder.get_or_insert_with(|| new_encoder(ctx))
    }

    /// The open compute pass, begun on the pending encoder if none is; while profiling none is
    /// open here (each profiled dispatch's pass is ended after it), so each dispatch (of `kernel`
    /// over `groups`) gets a pass of its own with its timestamps.
    fn pass<'a>(
        ctx: &WgpuContext,
        pending: &'a mut Pending,
        kernel: (&'static str, &'static str),
        groups: [u32; 3],
    ) -> &'a mut ::wgpu::ComputePass<'static> {
        if pending.pass.is_none() {
            let encoder = pending.encoder.get_or_insert_with(|| new_encoder(ctx));
            let pass = match pending.profile.as_mut() {
                Some(profile) => profile.begin_pass(encoder, kernel, groups),
                None => encoder
                    .begin_compute_pass(&::wgpu::ComputePassDescriptor { label: None, timestamp_writes: None })
                    .forget_lifetime(),
            };
            pending.pass = Some(pass);
        }
        match &mut pending.pass {
            Some(pass) => pass,
            None => unreachable!("the pass was begun above"),
        }
    }

    /// Starts timing every dispatch per kernel (`WgpuBackend::profile_kernels`).
    pub fn start_profile(&self, ctx: &WgpuContext) {
        let mut pending = self.lock();
        pending.pass = None; // a profiled dispatch begins its own pass, and `dispatch` ends it
        pending.profile = Some(KernelProfile::new(ctx, MAX_PENDING));
    }

    /// Stops timing and returns the profile; its last submit must have been collected (a
    /// `synchronize` first).
    pub fn stop_profile(&self) -> Option<KernelProfile> {
        self.lock().profile.take()
    }

    /// Records one dispatch of `kernel` over `groups` workgroups.
    pub fn dispatch(
        &self,
        ctx: &WgpuContext,
        kernel: &Kernel,
        params: &[u8],
        buffers: &[Binding<'_>],
        groups: [u32; 3],
    ) -> Result<()> {
        if params.len() > PARAM_BYTES {
            return Err(Error::Gpu(format!("kernel parameters of {} bytes exceed {PARAM_BYTES}", params.len())));
        }
        if groups.contains(&0) {
            return Ok(());
        }
        let mut pending = self.lock();
        if pending.dispatches >= pending.limit || pending.profile.as_ref().is_some_and(KernelProfile::full) {
            self.submit_locked(ctx, &mut pending)?;
        }
        let offset = pending.dispatches * self.slot;
        pending.params[offset..offset + params.len()].copy_from_slice(params);
        pending.params[offset + params.len()..offset + PARAM_BYTES].fill(0);
        let params_entry = ::wgpu::BindGroupEntry {
            binding: 0,
            resource: ::wgpu::BindingResource::Buffer(::wgpu::BufferBinding {
                buffer: &self.params_buffer,
                offset: offset as u64,
                size: NonZeroU64::new(PARAM_BYTES as u64),
            }),
        };
        let create = |entries: &[::wgpu::BindGroupEntry<'_>]| {
            ctx.device.create_bind_group(&::wgpu::BindGroupDescriptor { label: None, layout: &kernel.layout, entries })
        };
        let bind_group = if buffers.len() < FIXED_BINDINGS {
            // A fixed array instead of a Vec: no allocation per dispatch.
            let mut entries: [::wgpu::BindGroupEntry<'_>; FIXED_BINDINGS] =
                std::array::from_fn(|_| params_entry.clone());
            bind_buffers(&mut entries, buffers);
            create(&entries[..buffers.len() + 1])
        } else {
            let mut entries = vec![params_entry; buffers.len() + 1];
            bind_buffers(&mut entries, buffers);
            create(&entries)
        };
        let pass = Self::pass(ctx, &mut pending, kernel.name, groups);
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        pending.dispatches += 1;
        if pending.profile.is_some() {
            pending.pass = None; // writes the dispatch's end timestamp
        }
        Ok(())
    }

    /// Records a non-kernel command (copy, clear) in order with the kernels.
    pub fn record(&self, ctx: &WgpuContext, f: impl FnOnce(&mut ::wgpu::CommandEncoder)) {
        let mut pending = self.lock();
        f(Self::encoder(ctx, &mut pending));
    }

    fn submit_locked(&self, ctx: &WgpuContext, pending: &mut Pending) -> Result<()> {
        pending.pass = None; // ends the pass: the encoder cannot finish while one is open
        let Some(mut encoder) = pending.encoder.take() else { return Ok(()) };
        if let Some(profile) = &pending.profile {
            profile.resolve(&mut encoder);
        }
        if pending.dispatches > 0 {
            ctx.queue.write_buffer(&self.params_buffer, 0, &pending.params[..pending.dispatches * self.slot]);
        }
        pending.dispatches = 0;
        pending.limit = (pending.limit * 2).min(MAX_PENDING);
        pending.upload_bytes = 0;
        let index = ctx.queue.submit([encoder.finish()]);
        pending.in_flight.push_back(index);
        let wait = if pending.in_flight.len() > MAX_IN_FLIGHT { pending.in_flight.pop_front() } else { None };
        // Non-blocking unless the host is too far ahead; either way finished work is reclaimed.
        let poll = match wait {
            Some(index) => ::wgpu::PollType::Wait { submission_index: Some(index), timeout: None },
            None => ::wgpu::PollType::Poll,
        };
        ctx.device.poll(poll).map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        if let Some(profile) = pending.profile.as_mut() {
            profile.collect(ctx)?;
        }
        ctx.take_error()
    }

    /// Records the copy of an upload; submits once staged uploads grow large.
    pub fn upload(&self, ctx: &WgpuContext, staging: &::wgpu::Buffer, dst: &::wgpu::Buffer, bytes: u64) -> Result<()> {
        let mut pending = self.lock();
        Self::encoder(ctx, &mut pending).copy_buffer_to_buffer(staging, 0, dst, 0, bytes);
        pending.upload_bytes += bytes;
        if pending.upload_bytes > MAX_PENDING_UPLOAD {
            self.submit_locked(ctx, &mut pending)?;
        }
        Ok(())
    }

    /// Submits everything recorded so far.
    pub fn submit(&self, ctx: &WgpuContext) -> Result<()> {
        let mut pending = self.lock();
        self.submit_locked(ctx, &mut pending)
    }

    /// Submits and waits until the GPU has finished all of it.
    pub fn synchronize(&self, ctx: &WgpuContext) -> Result<()> {
        self.submit(ctx)?;
        self.wait(ctx, "waiting for the GPU", |status| status.is_queue_empty())
    }

    /// Waits until every submission has finished or `done` (asked after each non-blocking poll)
    /// says what the caller waits for has happened: polling for up to `self.spin` first, then
    /// blocking. A blocked thread is woken by the OS some time after the GPU finishes; polling
    /// sees it at once, as CUDA's default synchronisation does by spinning (see `spin_default`).
    fn wait(&self, ctx: &WgpuContext, what: &str, mut done: impl FnMut(::wgpu::PollStatus) -> bool) -> Result<()> {
        // The GPU will be idle when this returns: what comes next is submitted early.
        self.lock().limit = FIRST_SUBMIT;
        let gpu = |e: ::wgpu::PollError| Error::Gpu(format!("{what}: {e}"));
        if !self.spin.is_zero() {
            let start = Instant::now();
            loop {
                let status = ctx.device.poll(::wgpu::PollType::Poll).map_err(gpu)?;
                let empty = status.is_queue_empty();
                if done(status) || empty {
                    return ctx.take_error();
                }
                if start.elapsed() >= self.spin {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        ctx.device.poll(::wgpu::PollType::wait_indefinitely()).map_err(gpu)?;
        ctx.take_error()
    }

    /// Copies `bytes` bytes at `offset` of `buffer` to the host (a counted transfer).
    pub fn read(&self, ctx: &WgpuContext, buffer: &::wgpu::Buffer, offset: u64, bytes: u64) -> Result<Vec<u8>> {
        TRANSFERS.fetch_add(1, Ordering::Relaxed);
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let staging = self.take_staging(ctx, bytes);
        self.record(ctx, |enc| enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, bytes));
        self.submit(ctx)?;
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(::wgpu::MapMode::Read, ..bytes, move |r| {
            let _ = tx.send(r);
        });
        let mut mapped = None;
        self.wait(ctx, "waiting for a readback", |_| {
            mapped = mapped.take().or_else(|| rx.try_recv().ok());
            mapped.is_some()
        })?;
        // Once the wait returns, the callback has run (every submission finished and was polled).
        let mapped = match mapped {
            Some(result) => Ok(result),
            None => rx.recv(),
        };
        match mapped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Gpu(format!("mapping a readback buffer: {e}"))),
            Err(_) => return Err(Error::Gpu("readback was never mapped".into())),
        }
        let data = {
            let view = staging.get_mapped_range(..bytes).map_err(|e| Error::Gpu(format!("reading back: {e}")))?;
            view.to_vec()
        };
        staging.unmap();
        self.keep_staging(staging);
        Ok(data)
    }

    /// A mappable buffer of at least `bytes` bytes: an idle one, or a new one of `bytes`
    /// rounded up to its size class (so a loop of slightly varying reads reuses it).
    fn take_staging(&self, ctx: &WgpuContext, bytes: u64) -> ::wgpu::Buffer {
        {
            let mut idle = self.staging.lock().unwrap_or_else(|p| p.into_inner());
            let fit = idle.iter().enumerate().filter(|(_, b)| b.size() >= bytes).min_by_key(|(_, b)| b.size());
            if let Some((i, _)) = fit {
                return idle.swap_remove(i);
            }
        }
        let size =
            if bytes <= STAGING_KEPT_BYTES { size_class(bytes).min(STAGING_KEPT_BYTES).max(bytes) } else { bytes };
        ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus readback"),
            size,
            usage: ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Keeps an unmapped staging buffer for the next read, unless it is large or enough are kept
    /// (then the smallest idle one gives way to a larger one).
    fn keep_staging(&self, buffer: ::wgpu::Buffer) {
        if buffer.size() > STAGING_KEPT_BYTES {
            return;
        }
        let mut idle = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < STAGING_KEPT {
            idle.push(buffer);
        } else if let Some((i, _)) = idle.iter().enumerate().min_by_key(|(_, b)| b.size()) {
            if idle[i].size() < buffer.size() {
                idle[i] = buffer;
            }
        }
    }
}

/// A command encoder for recorded work.
fn new_encoder(ctx: &WgpuContext) -> ::wgpu::CommandEncoder {
    ctx.device.create_command_encoder(&::wgpu::CommandEncoderDescriptor { label: Some("rumus") })
}

/// Writes `buffers` into `entries[1..]` (entry 0 is the parameters') at bindings 1...
fn bind_buffers<'a>(entries: &mut [::wgpu::BindGroupEntry<'a>], buffers: &[Binding<'a>]) {
    for (i, b) in buffers.iter().enumerate() {
        // An empty tensor still binds 4 bytes: zero-sized bindings are invalid.
        let bytes = b.bytes.max(4).min(b.buffer.size());
        entries[i + 1] = ::wgpu::BindGroupEntry {
            binding: i as u32 + 1,
            resource: ::wgpu::BindingResource::Buffer(::wgpu::BufferBinding {
                buffer: b.buffer,
                offset: 0,
                size: NonZeroU64::new(bytes),
            }),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{spin_default, SPIN_DEFAULT_US};
    use std::time::Duration;

    #[test]
    fn waits_spin_on_gpus_only_unless_told() {
        assert_eq!(spin_default(true, None), Duration::from_micros(SPIN_DEFAULT_US));
        assert_eq!(spin_default(false, None), Duration::ZERO);
        assert_eq!(spin_default(true, Some(" 0 ")), Duration::ZERO);
        assert_eq!(spin_default(false, Some("250")), Duration::from_micros(250));
        assert_eq!(spin_default(true, Some("")), Duration::from_micros(SPIN_DEFAULT_US));
        assert_eq!(spin_default(false, Some("soon")), Duration::ZERO);
    }
}
