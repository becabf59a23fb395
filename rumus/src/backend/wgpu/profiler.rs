//! GPU time per kernel, for benchmarks: while a profile is on, every dispatch runs in a compute
//! pass of its own with timestamps written at its beginning and end, and each submit waits for
//! its timestamps and adds them up per kernel. Profiling serialises the host with the GPU at
//! every submit, so a profiled run is slower on the wall clock; the kernels' own times are what
//! it is for (which kernels a training step spends its GPU time in).

use std::collections::HashMap;

use super::context::WgpuContext;
use super::WgpuBackend;
use crate::{Error, Result};

/// The GPU time of one kernel at one dispatch size over a profiled run.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The shader file's name (`conv2d` for `conv2d.wgsl`).
    pub shader: &'static str,
    /// The entry point.
    pub entry: &'static str,
    /// The workgroups of its dispatches: a kernel run at several sizes has a time per size.
    pub groups: [u32; 3],
    /// Dispatches of it.
    pub calls: u64,
    /// Their GPU time in seconds, from timestamps at each dispatch's beginning and end.
    pub seconds: f64,
}

/// A kernel (shader, entry) and its workgroups.
type Dispatch = ((&'static str, &'static str), [u32; 3]);

/// The timestamps of one encoder's dispatches and the totals so far.
pub(crate) struct KernelProfile {
    queries: ::wgpu::QuerySet,
    resolved: ::wgpu::Buffer,
    readback: ::wgpu::Buffer,
    /// The kernel of each timed dispatch in the pending encoder, in order.
    pending: Vec<Dispatch>,
    capacity: usize,
    totals: HashMap<Dispatch, (u64, f64)>,
}

impl KernelProfile {
    /// A profile timing up to `capacity` dispatches per submit.
    pub fn new(ctx: &WgpuContext, capacity: usize) -> Self {
        let bytes = (capacity * 2 * 8) as u64;
        let buffer = |usage| {
            ctx.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("rumus kernel profile"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        KernelProfile {
            queries: ctx.device.create_query_set(&::wgpu::QuerySetDescriptor {
                label: Some("rumus kernel profile"),
                ty: ::wgpu::QueryType::Timestamp,
                count: (capacity * 2) as u32,
            }),
            resolved: buffer(::wgpu::BufferUsages::QUERY_RESOLVE | ::wgpu::BufferUsages::COPY_SRC),
            readback: buffer(::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST),
            pending: Vec::with_capacity(capacity),
            capacity,
            totals: HashMap::new(),
        }
    }

    /// Whether the pending encoder has no room for another timed dispatch.
    pub fn full(&self) -> bool {
        self.pending.len() >= self.capacity
    }

    /// Begins the compute pass of one dispatch of `kernel` over `groups` on `encoder`, with its
    /// timestamps.
    pub fn begin_pass(
        &mut self,
        encoder: &mut ::wgpu::CommandEncoder,
        kernel: (&'static str, &'static str),
        groups: [u32; 3],
    ) -> ::wgpu::ComputePass<'static> {
        let index = (self.pending.len() * 2) as u32;
        self.pending.push((kernel, groups));
        encoder
            .begin_compute_pass(&::wgpu::ComputePassDescriptor {
                label: Some(kernel.1),
                timestamp_writes: Some(::wgpu::ComputePassTimestampWrites {
                    query_set: &self.queries,
                    beginning_of_pass_write_index: Some(index),
                    end_of_pass_write_index: Some(index + 1),
                }),
            })
            .forget_lifetime()
    }

    /// Records the copy of the pending dispatches' timestamps to the host-visible buffer; the
    /// last command of an encoder about to be submitted.
    pub fn resolve(&self, encoder: &mut ::wgpu::CommandEncoder) {
        let count = (self.pending.len() * 2) as u32;
        if count > 0 {
            encoder.resolve_query_set(&self.queries, 0..count, &self.resolved, 0);
            encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, u64::from(count) * 8);
        }
    }

    /// Waits for the submitted encoder's timestamps and adds them to the totals.
    pub fn collect(&mut self, ctx: &WgpuContext) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = (self.pending.len() * 2 * 8) as u64;
        let (tx, rx) = std::sync::mpsc::channel();
        self.readback.map_async(::wgpu::MapMode::Read, ..bytes, move |r| {
            let _ = tx.send(r);
        });
        ctx.device
            .poll(::wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for kernel timestamps: {e}")))?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Gpu(format!("mapping kernel timestamps: {e}"))),
            Err(_) => return Err(Error::Gpu("kernel timestamps were never mapped".into())),
        }
        let ticks: Vec<u64> = {
            let view = self
                .readback
                .get_mapped_range(..bytes)
                .map_err(|e| Error::Gpu(format!("reading kernel timestamps: {e}")))?;
            bytemuck::pod_collect_to_vec(&view)
        };
        self.readback.unmap();
        let period_ns = f64::from(ctx.queue.get_timestamp_period());
        for (kernel, pair) in self.pending.drain(..).zip(ticks.chunks_exact(2)) {
            let total = self.totals.entry(kernel).or_insert((0, 0.0));
            total.0 += 1;
            total.1 += pair[1].saturating_sub(pair[0]) as f64 * period_ns * 1e-9;
        }
        Ok(())
    }

    /// The totals per kernel and size, longest first.
    pub fn into_times(self) -> Vec<KernelTime> {
        let mut times: Vec<KernelTime> = self
            .totals
            .into_iter()
            .map(|(((shader, entry), groups), (calls, seconds))| KernelTime { shader, entry, groups, calls, seconds })
            .collect();
        times.sort_by(|a, b| b.seconds.total_cmp(&a.seconds).then(a.entry.cmp(b.entry)));
        times
    }
}

/// The table a benchmark prints of a profile: the total, the time per kernel (shader and entry
/// point) longest first, the 40 longest kernels at one dispatch size, and the time per shader.
pub fn profile_table(what: &str, times: &[KernelTime]) -> String {
    use std::fmt::Write;
    let total: f64 = times.iter().map(|t| t.seconds).sum();
    let calls: u64 = times.iter().map(|t| t.calls).sum();
    let sum_by = |key: &dyn Fn(&KernelTime) -> String| {
        let mut sums: Vec<(String, u64, f64)> = Vec::new();
        for t in times {
            let k = key(t);
            match sums.iter_mut().find(|(s, ..)| *s == k) {
                Some((_, c, secs)) => (*c, *secs) = (*c + t.calls, *secs + t.seconds),
                None => sums.push((k, t.calls, t.seconds)),
            }
        }
        sums.sort_by(|a, b| b.2.total_cmp(&a.2));
        sums
    };
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "GPU time per kernel, {what}: {:.3} ms in {calls} dispatches", total * 1e3);
    let head = |out: &mut String, title: &str| {
        let _ = writeln!(out, "{title:<60} {:>6} {:>10} {:>7}", "calls", "ms", "share");
    };
    let row = |out: &mut String, name: &str, calls: u64, secs: f64| {
        let _ = writeln!(out, "{name:<60} {calls:>6} {:>10.3} {:>6.1}%", secs * 1e3, 100.0 * secs / total);
    };
    head(&mut out, "shader.entry");
    for (name, c, secs) in sum_by(&|t| format!("{}.{}", t.shader, t.entry)) {
        row(&mut out, &name, c, secs);
    }
    head(&mut out, "shader.entry [workgroups] (the 40 longest)");
    for t in times.iter().take(40) {
        row(&mut out, &format!("{}.{} {:?}", t.shader, t.entry, t.groups), t.calls, t.seconds);
    }
    let by_shader: Vec<String> =
        sum_by(&|t| t.shader.to_string()).iter().map(|(s, _, secs)| format!("{s} {:.3}", secs * 1e3)).collect();
    let _ = writeln!(out, "per shader (ms): {}", by_shader.join(", "));
    out
}

impl WgpuBackend {
    /// Runs `work` (which records kernels on this backend) with every dispatch timed on the GPU,
    /// and returns the time per kernel and dispatch size, longest first. Needs TIMESTAMP_QUERY. For benchmarks:
    /// the run is serialised at each submit, so its wall time is not the unprofiled one.
    pub fn profile_kernels(&self, work: impl FnOnce() -> Result<()>) -> Result<Vec<KernelTime>> {
        if !self.ctx.timestamps {
            return Err(Error::Gpu("profiling kernels needs timestamp queries, which this adapter lacks".into()));
        }
        self.synchronize()?;
        self.recorder.start_profile(&self.ctx);
        let worked = work();
        let synced = self.synchronize();
        let profile = self.recorder.stop_profile();
        worked?;
        synced?;
        profile.map(KernelProfile::into_times).ok_or_else(|| Error::Gpu("the kernel profile was lost".into()))
    }
}
