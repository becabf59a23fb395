//! The wgpu backend: every kernel is WGSL (in `rumus/shaders/`), recorded into one shared
//! command encoder and submitted at sync points. Nothing runs on the host for a wgpu tensor; the
//! only host transfers are uploads (`from_f32`/`from_u32`) and readbacks (`to_f32`/`to_u32`,
//! and the 4-byte flag of an index check when the host cannot vouch for the indices, see
//! `index_check.rs`), and readbacks are counted (see [`transfer_count`]).
//!
//! One launcher file per shader family, named like its shaders (`softmax.rs` launches
//! `softmax.wgsl` and `softmax_backward.wgsl`); each declares its kernels' parameters as the
//! `#[repr(C)]` twin of the WGSL `struct Params` (`params.rs`). This file holds the backend
//! and the `Backend` implementation, one delegation per op.

mod attention;
mod batch_norm;
mod buffer_pool;
mod context;
mod conv2d;
mod conv2d_coop;
mod conv2d_direct;
mod conv_algorithm;
mod coop_tiles;
mod copy;
mod cross_entropy;
mod elementwise;
mod encoder;
mod fill;
mod grad_unscale;
mod im2col;
mod index;
mod index_check;
mod launch;
mod layer_norm;
mod matmul;
mod optimizer;
mod params;
mod pipelines;
mod pooling;
mod profiler;
mod random;
mod recurrent;
mod reduce;
mod rms_norm;
mod runtime_dir;
mod softmax;
mod storage;
mod stride_phase;
mod timer;
pub(crate) mod warmup;
mod warp;
mod window;
mod winograd;

pub use buffer_pool::PoolStats;
pub use context::WgpuContext;
pub use conv2d::Conv2dTiles;
pub use conv_algorithm::ConvAlgorithm;
pub use encoder::transfer_count;
pub use matmul::{MatmulKernel, MatmulPlan};
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub use params::ParamLayout;
pub use profiler::{profile_table, KernelTime};
pub use storage::WgpuStorage;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use self::buffer_pool::BufferPool;
use self::encoder::Recorder;
use self::index_check::IndexFlag;
use self::pipelines::Pipelines;
use crate::backend::*;
use crate::{Error, Layout, Result};

/// Until the start-up warm-up has compiled a slow kernel (see `Pipelines::stand_in`), a call
/// of up to this many multiply-adds runs a simpler kernel computing the same values that is
/// compiled sooner (a stand-in: the direct convolution, the one-output-per-invocation matmul)
/// instead of waiting: far less time than the compile it replaces, at that size. LeNet-5's
/// largest product at batch 256 has 2^26.
const STAND_IN_MAX_MACS: usize = 1 << 28;

/// The WGSL of every kernel file as the backend compiles it on an adapter with or without
/// subgroups (op-code constants, reduction prelude and `rumus/shaders/lib/` includes in place),
/// as `(file name, source)`. For the naga validation in `tests/house/shaders_validate.rs`.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn compiled_sources(subgroups: bool) -> Vec<(&'static str, String)> {
    pipelines::all().map(|s| (s.name, Pipelines::source(s, subgroups))).collect()
}

/// The parameter struct each kernel file is launched with, as `(file name, layout)`, for the
/// check against the WGSL `struct Params` in `tests/house/shaders_validate.rs`.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn kernel_parameters() -> Vec<(&'static str, ParamLayout)> {
    pipelines::all().map(|s| (s.name, s.params)).collect()
}

/// The kernels the backend chooses by the adapter's limits, as it would choose them on an
/// adapter with `limits`: `(shader file, entry point)` of an f32 matmul of `args`, the dk/dv
/// attention backward's file for head dimension `d`, whether tensor cores may be turned on
/// (`Err` says why not) and the optimizer's files. For the check against WebGPU's default limits in
/// `tests/house/shaders_validate.rs`.
#[doc(hidden)]
pub fn kernel_under_limits(limits: &::wgpu::Limits, matmul: &MatmulArgs, d: usize) -> LimitedChoice {
    LimitedChoice {
        matmul: matmul::matmul_kernel_under(limits, matmul),
        attention_dkdv: attention::dkdv_kernel_under(limits, d),
        tensor_cores: coop_tiles::fits(limits),
        optimizer: optimizer::modules_under(limits),
    }
}

/// The `(shader file, entry point)` that the forward, input gradient and weight gradient of the
/// convolution `args` run on an adapter with `limits`: the dispatcher's own choice, for the
/// test that every kernel fits WebGPU's default limits or is gated on the adapter's.
#[doc(hidden)]
pub fn conv2d_kernels_under_limits(limits: &::wgpu::Limits, args: &Conv2dArgs) -> [(&'static str, &'static str); 3] {
    conv2d::conv2d_kernels_under(limits, args)
}

/// What [`kernel_under_limits`] returns.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitedChoice {
    /// `(shader file, entry point)` of the matmul.
    pub matmul: (&'static str, &'static str),
    /// The dk/dv backward's shader file; `None` above the largest head dimension.
    pub attention_dkdv: Option<&'static str>,
    /// Whether the adapter's limits allow the tensor-core matmul.
    pub tensor_cores: std::result::Result<(), String>,
    /// The optimizer's shader file for SGD, SGD with momentum, Adam and RMSprop (how many
    /// parameters one dispatch updates).
    pub optimizer: [&'static str; 4],
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
    /// The convolutions' algorithm: `RUMUS_WGPU_CONV` when the backend was created, or
    /// `with_conv_algorithm`'s.
    conv_algorithm: ConvAlgorithm,
    /// The tiles of the convolution kernels: [`Conv2dTiles::Auto`] (other settings in tests).
    conv2d_tiles: Conv2dTiles,
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

    /// How many kernels this backend has compiled (for tests of what a call compiles).
    #[cfg(test)]
    pub(crate) fn compiled_kernels(&self) -> usize {
        self.pipelines.compiled()
    }

    /// A second backend on the shared device whose reductions use workgroup shared memory even
    /// where subgroups exist: the fallback path of adapters without SUBGROUP, testable anywhere.
    /// (With the `testing` feature.)
    #[cfg(any(test, feature = "testing"))]
    pub fn with_shared_memory_reductions() -> Result<WgpuBackend> {
        let ctx = WgpuContext::get()?;
        let mut backend = WgpuBackend::new(ctx);
        backend.pipelines = Pipelines::new(false);
        Ok(backend)
    }

    /// A second backend on the shared device that dispatches at most `limit` workgroups per
    /// dimension, as an adapter with that limit would: the kernels that walk rows or tiles with a
    /// grid stride then run many laps at small sizes, which tests those loops cheaply. Kernels
    /// without one fail with a dispatch-limit error past `limit²` workgroups. (With the `testing`
    /// feature.)
    #[cfg(any(test, feature = "testing"))]
    pub fn with_dispatch_limit(limit: u32) -> Result<WgpuBackend> {
        let ctx = WgpuContext::get()?;
        let mut backend = WgpuBackend::new(ctx);
        backend.max_groups = backend.max_groups.min(limit.max(1) as usize);
        Ok(backend)
    }

    /// A second backend on the shared device whose convolutions run on the tiles `tiles` names
    /// (the large ones only where the adapter's workgroup memory allows them), so tests reach
    /// both kinds of tile at small sizes. (With the `testing` feature.)
    #[cfg(any(test, feature = "testing"))]
    pub fn with_conv2d_tiles(tiles: Conv2dTiles) -> Result<WgpuBackend> {
        let ctx = WgpuContext::get()?;
        let mut backend = WgpuBackend::new(ctx);
        backend.conv2d_tiles = tiles;
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
            usage: buffer_pool::STORAGE_USAGE,
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
            conv_algorithm: ConvAlgorithm::from_env(),
            conv2d_tiles: Conv2dTiles::Auto,
            ctx,
        }
    }

    /// The wgpu instance, adapter, device and queue this backend runs on, with the adapter's limits.
    pub fn context(&self) -> &Arc<WgpuContext> {
        &self.ctx
    }

    /// Submits all recorded work and waits for the GPU to finish it.
    pub fn synchronize(&self) -> Result<()> {
        self.recorder.synchronize(&self.ctx)
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
}

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "wgpu".into()
    }

    fn from_f32(&self, data: &[f32]) -> Result<Storage> {
        self.upload_f32(data)
    }

    fn from_u32(&self, data: &[u32]) -> Result<Storage> {
        self.upload_u32(data)
    }

    fn to_f32(&self, src: &Storage, layout: &Layout) -> Result<Vec<f32>> {
        Ok(bytemuck::pod_collect_to_vec(&self.read_words(src, layout, DType::F32, "to_vec")?))
    }

    fn to_u32(&self, src: &Storage, layout: &Layout) -> Result<Vec<u32>> {
        Ok(bytemuck::pod_collect_to_vec(&self.read_words(src, layout, DType::U32, "to_vec")?))
    }

    fn full(&self, len: usize, value: f32) -> Result<Storage> {
        self.fill_kernel(len, value)
    }

    fn copy_strided(&self, src: &Storage, src_layout: &Layout, dst: &Storage, dst_layout: &Layout) -> Result<()> {
        self.copy_strided_kernel(src, src_layout, dst, dst_layout)
    }

    fn random(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage> {
        self.random_kernel(kind, len, seed)
    }

    fn unary(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage> {
        self.unary_kernel(op, x, len)
    }

    fn unary_backward(&self, op: UnaryOp, x: &Storage, y: &Storage, grad: &Storage, len: usize) -> Result<Storage> {
        self.unary_backward_kernel(op, x, y, grad, len)
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage> {
        self.binary_kernel(op, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn reduce(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        self.reduce_kernel(op, x, dims)
    }

    fn argmax(&self, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        self.argmax_kernel(x, dims)
    }

    fn matmul(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        self.matmul_dispatch(lhs, rhs, args)
    }

    fn softmax(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        self.softmax_kernel(x, rows, cols, log)
    }

    fn softmax_backward(&self, y: &Storage, grad: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        self.softmax_backward_kernel(y, grad, rows, cols, log)
    }

    fn cross_entropy(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        self.cross_entropy_kernel(logits, targets, weights, args)
    }

    fn cross_entropy_backward(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        self.cross_entropy_backward_kernel(logits, targets, weights, grad_rows, args)
    }

    fn attention_forward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        args: &AttentionArgs,
    ) -> Result<Option<(Storage, Storage)>> {
        self.attention_forward_kernel(q, k, v, args)
    }

    fn attention_backward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        out: &Storage,
        lse: &Storage,
        dout: &Storage,
        args: &AttentionArgs,
    ) -> Result<Storage> {
        self.attention_backward_kernel(q, k, v, out, lse, dout, args)
    }

    fn recurrent_forward(
        &self,
        xproj: &Storage,
        w_hh_t: &Storage,
        b_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Storage)> {
        self.recurrent_forward_kernel(xproj, w_hh_t, b_hh, h0, c0, args)
    }

    fn recurrent_backward(
        &self,
        dpacked: &Storage,
        saved: &Storage,
        packed: &Storage,
        w_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Option<Storage>, Storage, Option<Storage>)> {
        self.recurrent_backward_kernel(dpacked, saved, packed, w_hh, h0, c0, args)
    }

    fn layer_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        self.layer_norm_kernel(x, weight, bias, args)
    }

    fn layer_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage> {
        self.layer_norm_backward_kernel(x, weight, mean, rstd, dy, args)
    }

    fn layer_norm_param_grads(
        &self,
        x: &Storage,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage)> {
        self.layer_norm_param_grads_kernel(x, mean, rstd, dy, args)
    }

    fn fuses_batch_norm(&self) -> bool {
        true
    }

    fn batch_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        stats: Option<(&Storage, &Storage)>,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        self.batch_norm_kernel(x, weight, bias, stats, args)
    }

    fn batch_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        mean: &Storage,
        var: &Storage,
        dy: &Storage,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        self.batch_norm_backward_kernel(x, weight, bias, mean, var, dy, args)
    }

    fn batch_norm_update_running(
        &self,
        running_mean: &Storage,
        running_var: &Storage,
        mean: &Storage,
        var: &Storage,
        momentum: f32,
        args: &BatchNormArgs,
    ) -> Result<()> {
        self.batch_norm_update_running_kernel(running_mean, running_var, mean, var, momentum, args)
    }

    fn rms_norm(&self, x: &Storage, weight: Option<&Storage>, args: &LayerNormArgs) -> Result<(Storage, Storage)> {
        self.rms_norm_kernel(x, weight, args)
    }

    fn rms_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage> {
        self.rms_norm_backward_kernel(x, weight, rstd, dy, args)
    }

    fn affine_warp(&self, x: &Storage, matrices: &Storage, args: &WarpArgs) -> Result<Storage> {
        self.affine_warp_kernel(x, matrices, args)
    }

    fn im2col(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.im2col_kernel(x, geom)
    }

    fn col2im(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.col2im_kernel(cols, geom)
    }

    /// Every geometry runs fused: implicit GEMMs in `conv2d.wgsl` (see `conv2d.rs`), or
    /// Winograd F(2×2, 3×3) or F(4×4, 3×3) where the backend's [`ConvAlgorithm`] takes it
    /// (`winograd.rs`).
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
        self.max_pool2d_kernel(x, geom)
    }

    fn max_pool2d_backward(&self, grad: &Storage, argmax: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.max_pool2d_backward_kernel(grad, argmax, geom)
    }

    fn avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.avg_pool2d_kernel(x, geom, false, "avg_pool2d")
    }

    fn avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.avg_pool2d_backward_kernel(grad, geom, false, "avg_pool2d")
    }

    fn adaptive_avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.avg_pool2d_kernel(x, geom, true, "adaptive_avg_pool2d")
    }

    fn adaptive_avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        self.avg_pool2d_backward_kernel(grad, geom, true, "adaptive_avg_pool2d")
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

    fn optimizer_steps(&self, updates: &[OptimizerUpdate<'_>]) -> Result<()> {
        self.optimizer_updates(updates, false)
    }

    fn unscale_grad(&self, grad: &Storage, len: usize, inv_scale: f32, found_non_finite: &Storage) -> Result<Storage> {
        self.unscale_grad_kernel(grad, len, inv_scale, found_non_finite)
    }

    fn sum_squares(&self, tensors: &[(&Storage, usize)]) -> Result<Storage> {
        self.sum_squares_kernel(tensors)
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
}
