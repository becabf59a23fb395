//! The wgpu backend: every kernel is WGSL (in `shaders/`), recorded into one shared command
//! encoder and submitted at sync points. Nothing runs on the host for a wgpu tensor; the only
//! host transfers are uploads (`from_f32`/`from_u32`) and readbacks (`to_f32`/`to_u32`, and the
//! 4-byte flag of an index check when the host cannot vouch for the indices, see
//! `index_check.rs`), and readbacks are counted (see [`transfer_count`]).

mod context;
mod conv2d;
mod conv2d_direct;
mod encoder;
mod index;
mod index_check;
mod matmul;
mod pipelines;
mod pool;
mod runtime_dir;
mod storage;
pub(crate) mod warmup;

pub use context::WgpuContext;
pub use encoder::transfer_count;
pub use pool::PoolStats;
pub use storage::WgpuStorage;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use bytemuck::cast_slice;

use self::encoder::{Binding, Recorder};
use self::index_check::IndexFlag;
use self::pipelines::{Access, Pipelines, Shader};
use self::pool::BufferPool;
use crate::backend::*;
use crate::{rng, Error, Layout, Result};

use Access::{Read as R, Write as W};

/// Invocations per workgroup of the 1-D kernels.
const WG: usize = 256;
/// Most axes a strided kernel takes in its parameters (after merging axes that are contiguous in
/// every operand); views of more go through `copy_strided_any`, which reads them from a buffer.
const MAX_RANK: usize = 8;
/// Until the start-up warm-up has compiled a slow kernel (see `Pipelines::stand_in`), a call
/// of up to this many multiply-adds runs a simpler kernel computing the same values that is
/// compiled sooner (a stand-in: the direct convolution, the one-output-per-invocation matmul)
/// instead of waiting. Those do 2^28 in well under a millisecond on the H200, against compiles
/// of 100-400 ms; LeNet-5's largest product at batch 256 has 2^26.
const STAND_IN_MAX_MACS: usize = 1 << 28;
/// Rows up to this long get one invocation each (softmax, cross-entropy, reductions); longer
/// rows get a workgroup each.
const SHORT_ROW: usize = 32;
/// A reduction of few long rows splits them until about this many workgroups share the work...
const SPREAD_GROUPS: usize = 1024;
/// ...but never into chunks shorter than this.
const MIN_CHUNK: usize = 4096;
/// A column reduction with few outputs splits the reduced axis until about this many
/// invocations share the work, in chunks of at least `MIN_COL_CHUNK`.
const SPREAD_THREADS: usize = 65_536;
const MIN_COL_CHUNK: usize = 64;

/// The WGSL of every kernel file as the backend compiles it on an adapter with or without
/// subgroups (reduction prelude and `shaders/lib/` includes in place), as `(file name, source)`.
/// For the naga validation in `tests/shaders_validate.rs`.
#[doc(hidden)]
pub fn compiled_sources(subgroups: bool) -> Vec<(&'static str, String)> {
    pipelines::ALL.iter().map(|s| (s.name, Pipelines::source(s, subgroups))).collect()
}

/// Waits up to `most` for the start-up warm-up threads (see `Device::wait_for_kernels`); an
/// error if they are still compiling then.
pub(crate) fn wait_for_warmup(most: std::time::Duration) -> Result<()> {
    if warmup::wait(most) {
        return Ok(());
    }
    Err(Error::Gpu(format!("the start-up warm-up is still compiling kernels after {} s", most.as_secs())))
}

/// Kernels of one wgpu device. All handles share one backend (and so one device and pool).
///
/// Each backend records into its own command encoder, so the work of two backends on one adapter
/// is not ordered: they are different [`Device`](crate::Device)s (`Device::same` is false), and a
/// storage of one passed to the other's kernels is [`Error::DeviceMismatch`].
pub struct WgpuBackend {
    ctx: Arc<WgpuContext>,
    pool: Arc<BufferPool>,
    pipelines: Pipelines,
    recorder: Recorder,
    /// Bound where a kernel declares a buffer an entry point does not use.
    dummy: ::wgpu::Buffer,
    /// Where index kernels record an out-of-range index (see `index_check.rs`).
    index_flag: IndexFlag,
    /// f32 matmuls may run on tensor cores with f16 inputs (`MatmulPrecision::F16TensorCores`).
    tensor_core_matmul: AtomicBool,
    /// Workgroups per dispatch dimension: the adapter's limit (less in a test variant).
    max_groups: usize,
}

static BACKEND: OnceLock<std::result::Result<Arc<WgpuBackend>, String>> = OnceLock::new();

impl WgpuBackend {
    /// The process-wide backend, created on first use.
    pub fn shared() -> Result<Arc<WgpuBackend>> {
        BACKEND
            .get_or_init(|| {
                let ctx = WgpuContext::get().map_err(|e| e.to_string())?;
                Ok(Arc::new(WgpuBackend::new(ctx)))
            })
            .clone()
            .map_err(|e| Error::Gpu(e.trim_start_matches("gpu: ").to_string()))
    }

    /// A second backend on the shared device with its own buffer pool, kernels and settings
    /// (such as the matmul precision), for work that must not change the shared backend's. It
    /// is a device of its own: its tensors do not mix with the shared backend's (move them
    /// with `to`).
    pub fn independent() -> Result<WgpuBackend> {
        Ok(WgpuBackend::new(WgpuContext::get()?))
    }

    /// A second backend on the shared device whose reductions use workgroup shared memory even
    /// where subgroups exist: the fallback path of adapters without SUBGROUP, testable anywhere.
    pub fn with_shared_memory_reductions() -> Result<WgpuBackend> {
        let ctx = WgpuContext::get()?;
        let mut backend = WgpuBackend::new(ctx);
        backend.pipelines = Pipelines::new(false);
        Ok(backend)
    }

    /// A second backend on the shared device that dispatches at most `limit` workgroups per
    /// dimension, as an adapter with that limit would: the kernels that walk rows or tiles with a
    /// grid stride then run many laps at small sizes, which tests those loops cheaply. Kernels
    /// without one fail with a dispatch-limit error past `limit²` workgroups.
    pub fn with_dispatch_limit(limit: u32) -> Result<WgpuBackend> {
        let ctx = WgpuContext::get()?;
        let mut backend = WgpuBackend::new(ctx);
        backend.max_groups = backend.max_groups.min(limit.max(1) as usize);
        Ok(backend)
    }

    /// True when this backend's reductions use subgroup operations.
    pub fn uses_subgroups(&self) -> bool {
        self.pipelines.subgroups()
    }

    fn new(ctx: Arc<WgpuContext>) -> Self {
        let dummy = ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus unused binding"),
            size: 256,
            usage: pool::STORAGE_USAGE,
            mapped_at_creation: false,
        });
        WgpuBackend {
            index_flag: IndexFlag::new(&ctx.device),
            pool: Arc::new(BufferPool::new()),
            pipelines: Pipelines::new(ctx.subgroups),
            recorder: Recorder::new(&ctx),
            dummy,
            tensor_core_matmul: AtomicBool::new(false),
            max_groups: ctx.limits.max_compute_workgroups_per_dimension.max(1) as usize,
            ctx,
        }
    }

    pub fn context(&self) -> &Arc<WgpuContext> {
        &self.ctx
    }

    /// Submits all recorded work and waits for the GPU to finish it.
    pub fn synchronize(&self) -> Result<()> {
        self.recorder.synchronize(&self.ctx)
    }

    /// Runs `work` (which records kernels on this backend) and returns the GPU time it took, in
    /// seconds, from timestamp queries written before and after it. Without TIMESTAMP_QUERY it
    /// returns the wall time between two full synchronisations instead. For benchmarks.
    pub fn time_gpu(&self, work: impl FnOnce() -> Result<()>) -> Result<f64> {
        if !self.ctx.timestamps {
            self.synchronize()?;
            let start = std::time::Instant::now();
            work()?;
            self.synchronize()?;
            return Ok(start.elapsed().as_secs_f64());
        }
        let queries = self.ctx.device.create_query_set(&::wgpu::QuerySetDescriptor {
            label: Some("rumus timer"),
            ty: ::wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = self.ctx.device.create_buffer(&::wgpu::BufferDescriptor {
            label: Some("rumus timer"),
            size: 16,
            usage: ::wgpu::BufferUsages::QUERY_RESOLVE | ::wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        // Empty passes that only write a timestamp bracket the recorded work in queue order.
        let mark = |begin: Option<u32>, end: Option<u32>| {
            self.recorder.record(&self.ctx, |enc| {
                let _pass = enc.begin_compute_pass(&::wgpu::ComputePassDescriptor {
                    label: Some("rumus timer"),
                    timestamp_writes: Some(::wgpu::ComputePassTimestampWrites {
                        query_set: &queries,
                        beginning_of_pass_write_index: begin,
                        end_of_pass_write_index: end,
                    }),
                });
            })
        };
        mark(Some(0), None);
        work()?;
        mark(None, Some(1));
        self.recorder.record(&self.ctx, |enc| enc.resolve_query_set(&queries, 0..2, &resolved, 0));
        let bytes = self.recorder.read(&self.ctx, &resolved, 0, 16)?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes);
        let &[start, end] = ticks.as_slice() else {
            return Err(Error::Gpu(format!("timer read {} timestamps, expected 2", ticks.len())));
        };
        let period_ns = self.ctx.queue.get_timestamp_period() as f64;
        Ok(end.saturating_sub(start) as f64 * period_ns * 1e-9)
    }

    /// Bytes held by the buffer pool for reuse.
    pub fn pooled_bytes(&self) -> u64 {
        self.pool.idle_bytes()
    }

    /// Live and idle buffer counts of this backend's pool, and its peak of live bytes.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Starts a new peak-memory measurement (see [`PoolStats::peak_live_bytes`]).
    pub fn reset_peak_memory(&self) {
        self.pool.reset_peak();
    }

    // ----- helpers -----

    /// The wgpu storage behind `s`, checked for element type and for belonging to this backend
    /// (another backend's commands are not ordered with this one's).
    fn gpu<'a>(&self, s: &'a Storage, dtype: DType, op: &'static str) -> Result<&'a WgpuStorage> {
        let w = gpu(s, dtype, op)?;
        if !w.belongs_to(&self.pool) {
            return Err(Error::DeviceMismatch { op, lhs: "wgpu".into(), rhs: "another wgpu backend".into() });
        }
        Ok(w)
    }

    fn alloc(&self, len: usize, dtype: DType, op: &str) -> Result<Arc<WgpuStorage>> {
        let bytes = (len as u64 * 4).max(4);
        let buffer = self.pool.acquire(&self.ctx.device, &self.ctx.limits, bytes, op)?;
        Ok(Arc::new(WgpuStorage::new(buffer, len, dtype, self.pool.clone())))
    }

    /// Workgroups covering `threads` invocations of a 256-wide kernel, split over x and y so no
    /// dimension exceeds the adapter's limit (65,535 on most).
    fn groups_for(&self, threads: usize, op: &str) -> Result<[u32; 3]> {
        self.groups_2d(threads.div_ceil(WG), op)
    }

    fn groups_2d(&self, groups: usize, op: &str) -> Result<[u32; 3]> {
        let max = self.max_groups;
        let x = groups.min(max);
        let y = groups.div_ceil(x.max(1));
        if y > max {
            return Err(Error::Gpu(format!("{op}: {groups} workgroups exceed the adapter's dispatch limit")));
        }
        Ok([x as u32, y as u32, 1])
    }

    /// Workgroups for kernels that walk rows with a grid stride: one per row up to one
    /// dispatch dimension (65,535 workgroups keep any GPU busy); beyond, each takes several rows.
    fn groups_rows(&self, rows: usize) -> [u32; 3] {
        let max = self.max_groups;
        [rows.min(max) as u32, 1, 1]
    }

    fn run(
        &self,
        shader: &Shader,
        entry: &'static str,
        signature: &[Access],
        params: &[u32],
        buffers: &[Binding<'_>],
        groups: [u32; 3],
    ) -> Result<()> {
        let kernel = self.pipelines.get(&self.ctx.device, shader, entry, signature)?;
        self.recorder.dispatch(&self.ctx, &kernel, cast_slice(params), buffers, groups)
    }

    fn output(&self, storage: Arc<WgpuStorage>) -> Storage {
        Storage::Wgpu(storage)
    }

    fn upload(&self, bytes: &[u8], len: usize, dtype: DType, op: &str) -> Result<Storage> {
        let out = self.alloc(len, dtype, op)?;
        if !bytes.is_empty() {
            // Staged through the shared encoder (not queue.write_buffer) so the write stays ordered
            // after earlier kernels that may still read this pooled buffer.
            let staging = self.ctx.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("rumus upload"),
                size: bytes.len() as u64,
                usage: ::wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            staging
                .get_mapped_range_mut(..)
                .map_err(|e| Error::Gpu(format!("{op}: mapping an upload buffer: {e}")))?
                .copy_from_slice(bytes);
            staging.unmap();
            self.recorder.upload(&self.ctx, &staging, out.buffer(), bytes.len() as u64)?;
        }
        Ok(self.output(out))
    }

    fn read_words(&self, src: &Storage, layout: &Layout, dtype: DType, op: &'static str) -> Result<Vec<u8>> {
        let s = self.gpu(src, dtype, op)?;
        let n = layout.numel();
        if n == 0 {
            return self.recorder.read(&self.ctx, s.buffer(), 0, 0);
        }
        if layout.is_contiguous() {
            check_extent(op, layout, s.len())?;
            return self.recorder.read(&self.ctx, s.buffer(), layout.offset() as u64 * 4, n as u64 * 4);
        }
        let tmp = self.alloc(n, dtype, op)?;
        self.copy_kernel(s, layout, &tmp, &Layout::contiguous(layout.shape()), op)?;
        self.recorder.read(&self.ctx, tmp.buffer(), 0, n as u64 * 4)
    }

    fn copy_kernel(
        &self,
        src: &WgpuStorage,
        sl: &Layout,
        dst: &WgpuStorage,
        dl: &Layout,
        op: &'static str,
    ) -> Result<()> {
        let n = sl.numel();
        if n == 0 {
            return Ok(());
        }
        check_extent(op, sl, src.len())?;
        check_extent(op, dl, dst.len())?;
        self.copy_recorded(src, sl, dst, dl, op)?;
        if dst.dtype() == DType::U32 {
            // What the host knows of the values: the source's bound, and the destination's own
            // where the copy leaves some of it.
            let covers_all = dl.is_contiguous() && dl.offset() == 0 && n == dst.len();
            let kept = if covers_all { Some(0) } else { dst.bound() };
            dst.set_bound(kept.zip(src.bound()).map(|(a, b)| a.max(b)));
        }
        Ok(())
    }

    /// Records the copy kernel for `copy_kernel` (views checked, at least one element).
    fn copy_recorded(
        &self,
        src: &WgpuStorage,
        sl: &Layout,
        dst: &WgpuStorage,
        dl: &Layout,
        op: &'static str,
    ) -> Result<()> {
        let n = sl.numel();
        let (shape, strides) = coalesce(sl.shape(), &[sl.strides(), dl.strides()]);
        let mut params = vec![n as u32, shape.len() as u32, sl.offset() as u32, dl.offset() as u32];
        let groups = self.groups_for(n, op)?;
        if shape.len() > MAX_RANK {
            // Too many axes for the parameters: they go in a buffer of their own.
            let axes: Vec<u32> = shape.iter().chain(&strides[0]).chain(&strides[1]).map(|&v| v as u32).collect();
            let Storage::Wgpu(axes) = self.from_u32(&axes)? else {
                return Err(Error::Gpu(format!("{op}: an upload left the device")));
            };
            let buffers = [bind(src), bind(dst), bind(&axes)];
            return self.run(&pipelines::COPY_STRIDED, "copy_strided_any", &[R, W, R], &params, &buffers, groups);
        }
        params.extend(padded(&shape, 1));
        params.extend(padded(&strides[0], 0));
        params.extend(padded(&strides[1], 0));
        self.run(&pipelines::COPY_STRIDED, "copy_strided", &[R, W], &params, &[bind(src), bind(dst)], groups)
    }

    fn zeroed(&self, len: usize, dtype: DType, op: &str) -> Result<Arc<WgpuStorage>> {
        let out = self.alloc(len, dtype, op)?;
        if len > 0 {
            let size = len as u64 * 4;
            self.recorder.record(&self.ctx, |enc| enc.clear_buffer(out.buffer(), 0, Some(size)));
        }
        Ok(out)
    }

    fn geom_params(g: &ConvGeom, n: usize, adaptive: bool) -> Vec<u32> {
        vec![
            n as u32,
            g.batch as u32,
            g.channels as u32,
            g.in_h as u32,
            g.in_w as u32,
            g.kernel_h as u32,
            g.kernel_w as u32,
            g.stride_h as u32,
            g.stride_w as u32,
            g.pad_h as u32,
            g.pad_w as u32,
            g.dilation_h as u32,
            g.dilation_w as u32,
            g.out_h as u32,
            g.out_w as u32,
            adaptive as u32,
            f32::NEG_INFINITY.to_bits(),
        ]
    }

    fn pool_forward(&self, x: &Storage, geom: &ConvGeom, adaptive: bool, op: &'static str) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, op)?;
        let n = geom.batch * geom.channels * geom.out_h * geom.out_w;
        check_len(op, x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let out = self.alloc(n, DType::F32, op)?;
        let params = Self::geom_params(geom, n, adaptive);
        let dummy = Binding { buffer: &self.dummy, bytes: 4 };
        self.run(
            &pipelines::POOL,
            "avg_pool2d",
            &[R, W, W],
            &params,
            &[bind(x), bind(&out), dummy],
            self.groups_for(n, op)?,
        )?;
        Ok(self.output(out))
    }

    fn pool_backward(&self, grad: &Storage, geom: &ConvGeom, adaptive: bool, op: &'static str) -> Result<Storage> {
        let grad = self.gpu(grad, DType::F32, op)?;
        check_len(op, grad, geom.batch * geom.channels * geom.out_h * geom.out_w)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, op)?;
        let params = Self::geom_params(geom, n, adaptive);
        let dummy = Binding { buffer: &self.dummy, bytes: 4 };
        self.run(
            &pipelines::POOL,
            "avg_pool2d_backward",
            &[R, W, W],
            &params,
            &[bind(grad), bind(&out), dummy],
            self.groups_for(n, op)?,
        )?;
        Ok(self.output(out))
    }
}

// ----- free helpers -----

/// The wgpu storage behind `s`, checked for element type.
fn gpu<'a>(s: &'a Storage, dtype: DType, op: &'static str) -> Result<&'a WgpuStorage> {
    match s {
        Storage::Wgpu(w) if w.dtype() == dtype => Ok(w),
        Storage::Wgpu(w) => Err(Error::DType { op, expected: dtype.name(), got: w.dtype().name() }),
        Storage::Cpu(_) => Err(Error::DeviceMismatch { op, lhs: "cpu".into(), rhs: "wgpu".into() }),
    }
}

fn bind(s: &WgpuStorage) -> Binding<'_> {
    Binding { buffer: s.buffer(), bytes: s.bytes() }
}

fn check_len(op: &'static str, s: &WgpuStorage, needed: usize) -> Result<()> {
    if s.len() < needed {
        return Err(Error::invalid(op, format!("storage holds {} elements, the kernel needs {needed}", s.len())));
    }
    Ok(())
}

/// Largest element a view touches must lie inside the storage.
fn check_extent(op: &'static str, layout: &Layout, len: usize) -> Result<()> {
    if layout.numel() == 0 {
        return Ok(());
    }
    let last = layout.offset()
        + layout.shape().iter().zip(layout.strides()).map(|(&d, &s)| d.saturating_sub(1) * s).sum::<usize>();
    if last >= len {
        return Err(Error::invalid(
            op,
            format!("view {:?} reaches element {last} of a storage of {len}", layout.shape()),
        ));
    }
    Ok(())
}

/// Drops size-1 axes and merges neighbours that are contiguous in every operand, so common views
/// need few axes.
fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for axis in 0..shape.len() {
        if shape[axis] == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().enumerate().all(|(k, s)| out_strides[k].last() == Some(&(s[axis] * shape[axis])));
        if mergeable {
            if let Some(last) = out_shape.last_mut() {
                *last *= shape[axis];
            }
            for (k, s) in strides.iter().enumerate() {
                if let Some(last) = out_strides[k].last_mut() {
                    *last = s[axis];
                }
            }
        } else {
            out_shape.push(shape[axis]);
            for (k, s) in strides.iter().enumerate() {
                out_strides[k].push(s[axis]);
            }
        }
    }
    if out_shape.is_empty() {
        out_shape.push(1);
        for s in &mut out_strides {
            s.push(0);
        }
    }
    (out_shape, out_strides)
}

/// `values` as u32 words padded to `MAX_RANK` with `fill`.
fn padded(values: &[usize], fill: u32) -> Vec<u32> {
    let mut v: Vec<u32> = values.iter().map(|&x| x as u32).collect();
    v.resize(MAX_RANK, fill);
    v
}

fn matrix_extent(l: &MatrixLayout, rows: usize, cols: usize, batch: usize) -> usize {
    l.offset
        + batch.saturating_sub(1) * l.batch_stride
        + rows.saturating_sub(1) * l.row_stride
        + cols.saturating_sub(1) * l.col_stride
}

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "wgpu".into()
    }

    fn from_f32(&self, data: &[f32]) -> Result<Storage> {
        self.upload(cast_slice(data), data.len(), DType::F32, "from_vec")
    }

    fn from_u32(&self, data: &[u32]) -> Result<Storage> {
        let storage = self.upload(cast_slice(data), data.len(), DType::U32, "from_indices")?;
        if let Storage::Wgpu(s) = &storage {
            s.set_bound(Some(data.iter().copied().max().unwrap_or(0)));
        }
        Ok(storage)
    }

    fn to_f32(&self, src: &Storage, layout: &Layout) -> Result<Vec<f32>> {
        let bytes = self.read_words(src, layout, DType::F32, "to_vec")?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    fn to_u32(&self, src: &Storage, layout: &Layout) -> Result<Vec<u32>> {
        let bytes = self.read_words(src, layout, DType::U32, "to_vec")?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    fn full(&self, len: usize, value: f32) -> Result<Storage> {
        if value.to_bits() == 0 {
            return Ok(self.output(self.zeroed(len, DType::F32, "full")?));
        }
        let out = self.alloc(len, DType::F32, "full")?;
        let params = [len as u32, value.to_bits()];
        self.run(&pipelines::FILL, "fill", &[W], &params, &[bind(&out)], self.groups_for(len, "full")?)?;
        Ok(self.output(out))
    }

    fn copy_strided(&self, src: &Storage, src_layout: &Layout, dst: &Storage, dst_layout: &Layout) -> Result<()> {
        let dtype = dst.dtype();
        let s = self.gpu(src, dtype, "copy")?;
        let d = self.gpu(dst, dtype, "copy")?;
        if src_layout.shape() != dst_layout.shape() {
            return Err(Error::shape(
                "copy",
                format!("source {:?} and destination {:?} differ", src_layout.shape(), dst_layout.shape()),
            ));
        }
        if src.same_memory(dst) {
            // One buffer cannot be bound for reading and writing at once: stage through a copy.
            let tmp = self.alloc(src_layout.numel(), dtype, "copy")?;
            let contiguous = Layout::contiguous(src_layout.shape());
            self.copy_kernel(s, src_layout, &tmp, &contiguous, "copy")?;
            return self.copy_kernel(&tmp, &contiguous, d, dst_layout, "copy");
        }
        self.copy_kernel(s, src_layout, d, dst_layout, "copy")
    }

    fn random(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage> {
        kind.check_len(len)?;
        let out = self.alloc(len, DType::F32, "random")?;
        let entry = match kind {
            RandomKind::Uniform => "random_uniform",
            RandomKind::Normal => "random_normal",
        };
        let params = [len as u32, rng::seed_key(seed)];
        self.run(&pipelines::RANDOM, entry, &[W], &params, &[bind(&out)], self.groups_for(len, "random")?)?;
        Ok(self.output(out))
    }

    fn unary(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, op.name())?;
        check_len(op.name(), x, len)?;
        let out = self.alloc(len, DType::F32, op.name())?;
        let [s0, s1] = op.scalars();
        let params = [len as u32, op.code(), s0.to_bits(), s1.to_bits(), f32::INFINITY.to_bits(), f32::NAN.to_bits()];
        self.run(
            &pipelines::UNARY,
            "unary",
            &[R, W],
            &params,
            &[bind(x), bind(&out)],
            self.groups_for(len, op.name())?,
        )?;
        Ok(self.output(out))
    }

    fn unary_backward(&self, op: UnaryOp, x: &Storage, y: &Storage, grad: &Storage, len: usize) -> Result<Storage> {
        let name = op.name();
        let (x, y, g) =
            (self.gpu(x, DType::F32, name)?, self.gpu(y, DType::F32, name)?, self.gpu(grad, DType::F32, name)?);
        for s in [x, y, g] {
            check_len(name, s, len)?;
        }
        let out = self.alloc(len, DType::F32, name)?;
        let [s0, s1] = op.scalars();
        let params = [len as u32, op.code(), s0.to_bits(), s1.to_bits(), f32::INFINITY.to_bits(), f32::NAN.to_bits()];
        self.run(
            &pipelines::UNARY_BACKWARD,
            "unary_backward",
            &[R, R, R, W],
            &params,
            &[bind(x), bind(y), bind(g), bind(&out)],
            self.groups_for(len, name)?,
        )?;
        Ok(self.output(out))
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage> {
        let name = op.name();
        let (l, r) = (self.gpu(lhs, DType::F32, name)?, self.gpu(rhs, DType::F32, name)?);
        if lhs_layout.shape() != rhs_layout.shape() {
            return Err(Error::shape(
                name,
                format!("lhs {:?} rhs {:?} were not broadcast", lhs_layout.shape(), rhs_layout.shape()),
            ));
        }
        check_extent(name, lhs_layout, l.len())?;
        check_extent(name, rhs_layout, r.len())?;
        let n = lhs_layout.numel();
        let out = self.alloc(n, DType::F32, name)?;
        if n == 0 {
            return Ok(self.output(out));
        }
        let contiguous = lhs_layout.is_contiguous() && rhs_layout.is_contiguous();
        let (shape, strides) = if contiguous {
            (vec![n], vec![vec![1], vec![1]])
        } else {
            coalesce(lhs_layout.shape(), &[lhs_layout.strides(), rhs_layout.strides()])
        };
        if shape.len() > MAX_RANK {
            // More axes than the kernel's parameters hold: copy both operands (any rank) first.
            let flat = Layout::contiguous(lhs_layout.shape());
            let packed = |s: &WgpuStorage, layout: &Layout| -> Result<Storage> {
                let tmp = self.alloc(n, DType::F32, name)?;
                self.copy_kernel(s, layout, &tmp, &flat, name)?;
                Ok(self.output(tmp))
            };
            let (l, r) = (packed(l, lhs_layout)?, packed(r, rhs_layout)?);
            return self.binary(op, &l, &flat, &r, &flat);
        }
        let mut params = vec![
            n as u32,
            op.code(),
            shape.len() as u32,
            contiguous as u32,
            lhs_layout.offset() as u32,
            rhs_layout.offset() as u32,
            0,
            0,
        ];
        params.extend(padded(&shape, 1));
        params.extend(padded(&strides[0], 0));
        params.extend(padded(&strides[1], 0));
        self.run(
            &pipelines::BINARY,
            "binary",
            &[R, R, W],
            &params,
            &[bind(l), bind(r), bind(&out)],
            self.groups_for(n, name)?,
        )?;
        Ok(self.output(out))
    }

    fn reduce(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "reduce")?;
        check_len("reduce", x, dims.outer * dims.len * dims.inner)?;
        let n = dims.outer * dims.inner;
        if n == 0 {
            return Ok(self.output(self.alloc(0, DType::F32, "reduce")?));
        }
        let (code, identity) = match op {
            ReduceOp::Sum => (0u32, 0.0f32),
            ReduceOp::Max => (1, f32::NEG_INFINITY),
            ReduceOp::Min => (2, f32::INFINITY),
        };
        // The column kernel also reduces long rows, more slowly: a stand-in until the row kernel
        // is compiled (see `Pipelines::stand_in`).
        if dims.inner > 1 || dims.len <= SHORT_ROW || self.pipelines.stand_in(&pipelines::REDUCE, "reduce_rows") {
            // One invocation per output, coalesced across `inner`; with few outputs the reduced
            // axis is split into chunks (partials reduced by a second pass) so the GPU fills up.
            let chunks = SPREAD_THREADS.div_ceil(n).clamp(1, dims.len.div_ceil(MIN_COL_CHUNK).max(1));
            let chunk_len = dims.len.div_ceil(chunks).max(1);
            let target = self.alloc(n * chunks, DType::F32, "reduce")?;
            let params = [
                dims.outer as u32,
                dims.len as u32,
                dims.inner as u32,
                code,
                identity.to_bits(),
                chunks as u32,
                chunk_len as u32,
                f32::NAN.to_bits(),
            ];
            let groups = self.groups_for(n * chunks, "reduce")?;
            self.run(&pipelines::REDUCE, "reduce_cols", &[R, W], &params, &[bind(x), bind(&target)], groups)?;
            if chunks == 1 {
                return Ok(self.output(target));
            }
            let partial = ReduceDims { outer: dims.outer, len: chunks, inner: dims.inner };
            return self.reduce(op, &self.output(target), partial);
        }
        // Few long rows: split each into chunks so the whole GPU works, then reduce the partials.
        let chunks = SPREAD_GROUPS.div_ceil(dims.outer).clamp(1, dims.len.div_ceil(MIN_CHUNK));
        let chunk_len = dims.len.div_ceil(chunks);
        let rows = dims.outer * chunks;
        let target = self.alloc(rows, DType::F32, "reduce")?;
        let params = [
            rows as u32,
            dims.len as u32,
            1,
            code,
            identity.to_bits(),
            chunks as u32,
            chunk_len as u32,
            f32::NAN.to_bits(),
        ];
        self.run(
            &pipelines::REDUCE,
            "reduce_rows",
            &[R, W],
            &params,
            &[bind(x), bind(&target)],
            self.groups_rows(rows),
        )?;
        if chunks == 1 {
            return Ok(self.output(target));
        }
        self.reduce(op, &self.output(target), ReduceDims { outer: dims.outer, len: chunks, inner: 1 })
    }

    fn argmax(&self, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "argmax")?;
        check_len("argmax", x, dims.outer * dims.len * dims.inner)?;
        let n = dims.outer * dims.inner;
        let out = self.alloc(n, DType::U32, "argmax")?;
        out.set_bound(Some(dims.len.saturating_sub(1) as u32));
        let params = [dims.outer as u32, dims.len as u32, dims.inner as u32, f32::NEG_INFINITY.to_bits()];
        self.run(
            &pipelines::ARGMAX,
            "argmax",
            &[R, W],
            &params,
            &[bind(x), bind(&out)],
            self.groups_for(n, "argmax")?,
        )?;
        Ok(self.output(out))
    }

    fn matmul(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        self.matmul_dispatch(lhs, rhs, args)
    }

    fn softmax(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "softmax")?;
        check_len("softmax", x, rows * cols)?;
        let out = self.alloc(rows * cols, DType::F32, "softmax")?;
        let params = [rows as u32, cols as u32, log as u32, f32::NEG_INFINITY.to_bits()];
        if cols <= SHORT_ROW {
            self.run(
                &pipelines::SOFTMAX,
                "softmax_short",
                &[R, W],
                &params,
                &[bind(x), bind(&out)],
                self.groups_for(rows, "softmax")?,
            )?;
        } else {
            self.run(&pipelines::SOFTMAX, "softmax", &[R, W], &params, &[bind(x), bind(&out)], self.groups_rows(rows))?;
        }
        Ok(self.output(out))
    }

    fn softmax_backward(&self, y: &Storage, grad: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        let (y, g) = (self.gpu(y, DType::F32, "softmax_backward")?, self.gpu(grad, DType::F32, "softmax_backward")?);
        check_len("softmax_backward", y, rows * cols)?;
        check_len("softmax_backward", g, rows * cols)?;
        let out = self.alloc(rows * cols, DType::F32, "softmax_backward")?;
        let params = [rows as u32, cols as u32, log as u32, 0];
        let (entry, groups) = if cols <= SHORT_ROW {
            ("softmax_backward_short", self.groups_for(rows, "softmax_backward")?)
        } else {
            ("softmax_backward", self.groups_rows(rows))
        };
        self.run(&pipelines::SOFTMAX_BACKWARD, entry, &[R, R, W], &params, &[bind(y), bind(g), bind(&out)], groups)?;
        Ok(self.output(out))
    }

    fn cross_entropy(&self, logits: &Storage, targets: &Storage, args: &CrossEntropyArgs) -> Result<Storage> {
        let (x, t) = (self.gpu(logits, DType::F32, "cross_entropy")?, self.gpu(targets, DType::U32, "cross_entropy")?);
        check_len("cross_entropy", x, args.rows * args.classes)?;
        check_len("cross_entropy", t, args.rows)?;
        if args.classes == 0 {
            return Err(Error::invalid("cross_entropy", "zero classes"));
        }
        let out = self.alloc(args.rows, DType::F32, "cross_entropy")?;
        let params = [args.rows as u32, args.classes as u32, args.smoothing.to_bits(), f32::NEG_INFINITY.to_bits()];
        let (entry, groups) = if args.classes <= SHORT_ROW {
            ("cross_entropy_short", self.groups_for(args.rows, "cross_entropy")?)
        } else {
            ("cross_entropy", self.groups_rows(args.rows))
        };
        // The forward does not read per-row gradients; the logits fill that binding.
        self.checked_indices("cross_entropy", t, args.classes, || {
            let buffers = [bind(x), bind(t), bind(x), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &[R, R, R, W, W], &params, &buffers, groups)
        })?;
        Ok(self.output(out))
    }

    fn cross_entropy_backward(
        &self,
        logits: &Storage,
        targets: &Storage,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        let op = "cross_entropy";
        let (x, t, g) = (
            self.gpu(logits, DType::F32, op)?,
            self.gpu(targets, DType::U32, op)?,
            self.gpu(grad_rows, DType::F32, op)?,
        );
        check_len(op, x, args.rows * args.classes)?;
        check_len(op, t, args.rows)?;
        check_len(op, g, args.rows)?;
        if args.classes == 0 {
            return Err(Error::invalid(op, "zero classes"));
        }
        let out = self.alloc(args.rows * args.classes, DType::F32, op)?;
        let params = [args.rows as u32, args.classes as u32, args.smoothing.to_bits(), f32::NEG_INFINITY.to_bits()];
        let (entry, groups) = if args.classes <= SHORT_ROW {
            ("cross_entropy_backward_short", self.groups_for(args.rows, op)?)
        } else {
            ("cross_entropy_backward", self.groups_rows(args.rows))
        };
        self.checked_indices(op, t, args.classes, || {
            let buffers = [bind(x), bind(t), bind(g), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &[R, R, R, W, W], &params, &buffers, groups)
        })?;
        Ok(self.output(out))
    }

    fn im2col(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "conv2d")?;
        check_len("conv2d", x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let n = geom.batch * geom.channels * geom.kernel_h * geom.kernel_w * geom.out_h * geom.out_w;
        let out = self.alloc(n, DType::F32, "conv2d")?;
        let params = Self::geom_params(geom, n, false);
        self.run(
            &pipelines::IM2COL,
            "im2col",
            &[R, W],
            &params,
            &[bind(x), bind(&out)],
            self.groups_for(n, "conv2d")?,
        )?;
        Ok(self.output(out))
    }

    fn col2im(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage> {
        let c = self.gpu(cols, DType::F32, "conv2d")?;
        check_len("conv2d", c, geom.batch * geom.channels * geom.kernel_h * geom.kernel_w * geom.out_h * geom.out_w)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, "conv2d")?;
        let params = Self::geom_params(geom, n, false);
        self.run(
            &pipelines::COL2IM,
            "col2im",
            &[R, W],
            &params,
            &[bind(c), bind(&out)],
            self.groups_for(n, "conv2d")?,
        )?;
        Ok(self.output(out))
    }

    /// Every geometry runs fused: implicit GEMMs in `conv2d.wgsl` (see `conv2d.rs`).
    fn conv2d(
        &self,
        x: &Storage,
        weight: &Storage,
        bias: Option<&Storage>,
        args: &Conv2dArgs,
    ) -> Result<Option<Storage>> {
        self.conv2d_fused(x, weight, bias, args).map(Some)
    }

    fn conv2d_backward(
        &self,
        x: &Storage,
        weight: &Storage,
        grad: &Storage,
        args: &Conv2dArgs,
        wanted: Conv2dWanted,
    ) -> Result<Conv2dGrads<Storage>> {
        self.conv2d_fused_backward(x, weight, grad, args, wanted)
    }

    fn max_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<(Storage, Storage)> {
        let op = "max_pool2d";
        let x = self.gpu(x, DType::F32, op)?;
        check_len(op, x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let n = geom.batch * geom.channels * geom.out_h * geom.out_w;
        let out = self.alloc(n, DType::F32, op)?;
        let arg = self.alloc(n, DType::U32, op)?;
        let params = Self::geom_params(geom, n, false);
        self.run(
            &pipelines::POOL,
            "max_pool2d",
            &[R, W, W],
            &params,
            &[bind(x), bind(&out), bind(&arg)],
            self.groups_for(n, op)?,
        )?;
        Ok((self.output(out), self.output(arg)))
    }

    fn max_pool2d_backward(&self, grad: &Storage, argmax: &Storage, geom: &ConvGeom) -> Result<Storage> {
        let op = "max_pool2d";
        let (g, a) = (self.gpu(grad, DType::F32, op)?, self.gpu(argmax, DType::U32, op)?);
        let pooled = geom.batch * geom.channels * geom.out_h * geom.out_w;
        check_len(op, g, pooled)?;
        check_len(op, a, pooled)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, op)?;
        let params = Self::geom_params(geom, n, false);
        self.run(
            &pipelines::POOL,
            "max_pool2d_backward",
            &[R, W, W],
            &params,
            &[bind(g), bind(&out), bind(a)],
            self.groups_for(n, op)?,
        )?;
        Ok(self.output(out))
    }

    fn avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.pool_forward(x, geom, false, "avg_pool2d")
    }

    fn avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.pool_backward(grad, geom, false, "avg_pool2d")
    }

    fn adaptive_avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.pool_forward(x, geom, true, "adaptive_avg_pool2d")
    }

    fn adaptive_avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.pool_backward(grad, geom, true, "adaptive_avg_pool2d")
    }

    fn index_select(&self, x: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        let IndexArgs { outer, len, inner, count } = *args;
        self.index_forward("index_select", "index_select", x, idx, [outer, len, inner, count])
    }

    fn index_add(&self, grad: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        self.index_add_kernel(grad, idx, args)
    }

    fn gather(&self, x: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        let GatherArgs { outer, len, inner, count } = *args;
        self.index_forward("gather", "gather", x, idx, [outer, len, inner, count])
    }

    fn scatter_add(&self, grad: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        self.scatter_add_kernel(grad, idx, args)
    }

    fn optimizer_step(
        &self,
        step: &OptimizerStep,
        param: &Storage,
        grad: &Storage,
        state: &[&Storage],
        len: usize,
    ) -> Result<()> {
        let op = "optimizer";
        let (p, g) = (self.gpu(param, DType::F32, op)?, self.gpu(grad, DType::F32, op)?);
        check_len(op, p, len)?;
        check_len(op, g, len)?;
        let states = state.iter().map(|s| self.gpu(s, DType::F32, op)).collect::<Result<Vec<_>>>()?;
        for s in &states {
            check_len(op, s, len)?;
        }
        let need = |k: usize| -> Result<()> {
            if states.len() < k {
                return Err(Error::invalid(
                    op,
                    format!("this optimizer needs {k} state buffers, got {}", states.len()),
                ));
            }
            Ok(())
        };
        let groups = self.groups_for(len, op)?;
        let word = |v: f32| v.to_bits();
        match *step {
            OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, first_step } => {
                let flags = nesterov as u32 | (first_step as u32) << 1;
                let params =
                    [len as u32, flags, word(lr), word(weight_decay), word(momentum), word(dampening), 0, 0, 0];
                if momentum != 0.0 {
                    need(1)?;
                    self.run(
                        &pipelines::OPTIMIZER,
                        "sgd_momentum",
                        &[W, R, W],
                        &params,
                        &[bind(p), bind(g), bind(states[0])],
                        groups,
                    )
                } else {
                    self.run(&pipelines::OPTIMIZER, "sgd", &[W, R], &params, &[bind(p), bind(g)], groups)
                }
            }
            OptimizerStep::Adam { lr, beta1, beta2, eps, weight_decay, decoupled, step } => {
                need(2)?;
                let bias1 = 1.0 - beta1.powi(step as i32);
                let bias2 = 1.0 - beta2.powi(step as i32);
                let flags = (decoupled as u32) << 2;
                let params = [
                    len as u32,
                    flags,
                    word(lr),
                    word(weight_decay),
                    word(beta1),
                    word(beta2),
                    word(eps),
                    word(bias1),
                    word(bias2),
                ];
                self.run(
                    &pipelines::OPTIMIZER,
                    "adam",
                    &[W, R, W, W],
                    &params,
                    &[bind(p), bind(g), bind(states[0]), bind(states[1])],
                    groups,
                )
            }
            OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum } => {
                need(2)?;
                let params =
                    [len as u32, 0, word(lr), word(weight_decay), word(alpha), word(momentum), word(eps), 0, 0];
                self.run(
                    &pipelines::OPTIMIZER,
                    "rmsprop",
                    &[W, R, W, W],
                    &params,
                    &[bind(p), bind(g), bind(states[0]), bind(states[1])],
                    groups,
                )
            }
        }
    }
}

/// Inputs and read-back for the backend's unit tests.
#[cfg(test)]
mod test_data {
    use super::WgpuBackend;
    use crate::backend::{Backend, Storage};
    use crate::Layout;

    /// `len` standard normal values (`rng::normal` under `seed`) on `b`.
    pub(super) fn normal(b: &WgpuBackend, len: usize, seed: u32) -> Storage {
        b.from_f32(&(0..len as u32).map(|i| crate::rng::normal(seed, i)).collect::<Vec<f32>>()).unwrap()
    }

    /// All of `s`, read back.
    pub(super) fn read(b: &WgpuBackend, s: &Storage) -> Vec<f32> {
        b.to_f32(s, &Layout::contiguous(&[s.len()])).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> Option<Arc<WgpuBackend>> {
        match crate::testing::wgpu_or_skip()? {
            crate::Device::Wgpu(b) => Some(b),
            crate::Device::Cpu => None,
        }
    }

    #[test]
    fn freed_buffers_are_reused_from_the_pool() {
        let Some(b) = backend() else { return };
        let len = 123_457;
        let first = b.full(len, 1.0).unwrap();
        let Storage::Wgpu(s) = &first else { panic!("not a wgpu storage") };
        let class = s.buffer().size();
        let idle_before = b.pooled_bytes();
        drop(first);
        assert_eq!(b.pooled_bytes(), idle_before + class, "a dropped tensor's buffer goes to the pool");
        let second = b.full(len - 1000, 2.0).unwrap();
        assert_eq!(b.pooled_bytes(), idle_before, "an allocation of the same class takes it back");
        assert_eq!(second.len(), len - 1000);
        let data = b.to_f32(&second, &Layout::contiguous(&[len - 1000])).unwrap();
        assert!(data.iter().all(|&v| v == 2.0));
    }

    #[test]
    fn best_never_picks_a_cpu_emulation() {
        let Some(b) = backend() else { return };
        if std::env::var("RUMUS_DEVICE").is_err() {
            let best = crate::Device::best();
            assert_eq!(
                best.is_wgpu(),
                b.context().is_hardware(),
                "best() picked {best} on {}",
                b.context().adapter_name()
            );
        }
    }

    #[test]
    fn coalesce_merges_contiguous_axes_and_drops_unit_axes() {
        let (shape, strides) = coalesce(&[2, 3, 4], &[&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(shape, vec![24]);
        assert_eq!(strides, vec![vec![1], vec![1]]);
        // Transposed second operand: nothing merges across the swapped axes.
        let (shape, strides) = coalesce(&[3, 1, 4], &[&[4, 4, 1], &[1, 1, 3]]);
        assert_eq!(shape, vec![3, 4]);
        assert_eq!(strides, vec![vec![4, 1], vec![1, 3]]);
        let (shape, _) = coalesce(&[1, 1], &[&[1, 1]]);
        assert_eq!(shape, vec![1]);
    }
}
