//! Start-up warm-up, the backend's half: the threads that compile kernels in the background as
//! soon as the wgpu device exists, and the kernel works they run, each a few tiny calls of this
//! backend's own kernels. Which works run, in which order, is the table in the crate's
//! `warmup.rs`, which adds whole forward/backward passes (ops, layers, an optimizer step) that
//! the backend, knowing nothing above it, cannot write.
//!
//! `THREADS` threads take the works from the front in turn, so the driver compiles that many
//! kernels in parallel while the program is still loading its data; a kernel a later op needs is
//! then already in the cache (or being compiled, and the op waits for it). Until the slow kernels
//! are compiled, ops run stand-ins that compute the same values (see `Pipelines::stand_in`);
//! those first steps' results differ from a warm process's by float rounding only. For runs that
//! must repeat bit for bit, `RUMUS_WGPU_WARMUP=0` turns the warm-up, and with it the stand-ins,
//! off (every kernel then compiles on first use).
//!
//! The warm-up reads nothing back to the host (the transfer count stays untouched), ignores its
//! own errors (it is only an optimisation; real ops report theirs) and runs only on hardware
//! adapters, not on CPU emulations such as lavapipe.
//!
//! The process waits for the warm-up at exit (up to `EXIT_WAIT`): NVIDIA's driver tears itself
//! down in an exit handler, and a pipeline compile still running on another thread then
//! crashes the process (SIGSEGV or SIGABRT after the last line of output; seen on the H200 in
//! test binaries that finish in a fraction of a second).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::{Duration, Instant};

use super::conv2d::Dims;
use super::pipelines::Pipelines;
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{
    AttentionArgs, AttentionLayout, Backend, BatchNormArgs, BinaryOp, Conv2dArgs, Conv2dWanted, ConvGeom,
    CrossEntropyArgs, DType, IndexArgs, LayerNormArgs, MatmulArgs, MatrixLayout, OptimizerStep, OptimizerUpdate,
    RandomKind, ReduceDims, ReduceOp, Storage, UnaryOp,
};
use crate::{Layout, Result};

/// Warm-up threads still running, and the signal that one finished.
static RUNNING: Mutex<usize> = Mutex::new(0);
static FINISHED: Condvar = Condvar::new();
/// The longest an exiting process waits for the warm-up (far longer than the warm-up takes).
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Registered with `atexit` after the driver is loaded, so it runs before the driver's handler.
extern "C" fn wait_for_warmup() {
    wait(EXIT_WAIT);
}

/// Waits until every warm-up thread has finished, or `most` has passed; whether they finished.
pub(crate) fn wait(most: Duration) -> bool {
    let deadline = Instant::now() + most;
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        running = FINISHED.wait_timeout(running, left).unwrap_or_else(|p| p.into_inner()).0;
    }
    true
}

/// Counts one warm-up thread as running, for the process and for its backend's kernels, until
/// dropped (even by a panic).
struct Running(Arc<WgpuBackend>);

impl Running {
    fn new(backend: &Arc<WgpuBackend>) -> Running {
        *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        backend.pipelines.warming().fetch_add(1, Ordering::AcqRel);
        Running(backend.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.pipelines.warming().fetch_sub(1, Ordering::AcqRel);
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        FINISHED.notify_all();
    }
}

/// A kernel work: one or a few tiny calls that make this backend compile their kernels.
pub(crate) type KernelWork = fn(&WgpuBackend) -> Result<()>;

/// A work as the threads run it: a kernel work bound to its backend, or a pass given from above.
pub(crate) type Work = Box<dyn Fn() -> Result<()> + Send + Sync>;

/// `kernel` bound to `backend`, to run among the works.
pub(crate) fn bind(kernel: KernelWork, backend: &Arc<WgpuBackend>) -> Work {
    let backend = backend.clone();
    Box::new(move || kernel(&backend))
}

/// Compiles at once: more made each compile slower than it saved (twelve at once made the
/// strided 128-tile matmul take 0.36 s, not 0.22).
const THREADS: usize = 10;

/// Starts the warm-up threads (detached; they finish within a fraction of a second), which run
/// `works` in order, `THREADS` at a time, and take no new work once the program's first
/// optimizer update is recorded (`Pipelines::note_training_step`): what its first training step
/// did not ask for by then is compiled when first used, instead of beside its next steps, which
/// the compiles slow down. Nothing on a CPU emulation, or with `RUMUS_WGPU_WARMUP=0`.
pub(crate) fn start(backend: &Arc<WgpuBackend>, works: Vec<Work>) {
    if !backend.context().is_hardware() || std::env::var("RUMUS_WGPU_WARMUP").is_ok_and(|v| v.trim() == "0") {
        return;
    }
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function that only waits on a std condition variable.
        #[cfg(unix)]
        unsafe {
            libc::atexit(wait_for_warmup);
        }
    });
    spawn(backend, works);
}

/// Spawns the `THREADS` threads that run `works` in order, each counted as running until it ends.
fn spawn(backend: &Arc<WgpuBackend>, works: Vec<Work>) {
    let works: Arc<[Work]> = works.into();
    let next = Arc::new(AtomicUsize::new(0));
    for _ in 0..THREADS {
        let (works, next) = (works.clone(), next.clone());
        let running = Running::new(backend);
        // Without threads the kernels simply compile on first use (a failed spawn drops
        // `running` with the closure).
        let _ = std::thread::Builder::new().name("rumus-warmup".into()).spawn(move || {
            Pipelines::mark_warmup_thread();
            // No new work once the program has stepped an optimizer (see `warmup.rs`'s table).
            while !running.0.pipelines.training_started() {
                let Some(work) = works.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                let _ = work();
            }
        });
    }
}

/// The convolution the works run: [2, 3, 8, 8] under 4 filters of 5×5 with padding 2. Their
/// inputs are uploaded, not filled or drawn, so that no other kernel's compile comes first.
fn conv_args() -> Conv2dArgs {
    let geom = ConvGeom {
        batch: 2,
        channels: 3,
        in_h: 8,
        in_w: 8,
        kernel_h: 5,
        kernel_w: 5,
        stride_h: 1,
        stride_w: 1,
        pad_h: 2,
        pad_w: 2,
        dilation_h: 1,
        dilation_w: 1,
        out_h: 8,
        out_w: 8,
    };
    Conv2dArgs { geom, out_channels: 4, groups: 1 }
}

pub(crate) fn conv_forward(b: &WgpuBackend) -> Result<()> {
    let a = conv_args();
    let d = Dims::of(&a);
    let (x, w, bias) = (upload(b, d.input)?, upload(b, d.weight)?, upload(b, a.out_channels)?);
    b.conv2d(&x, &w, Some(&bias), &a)?;
    Ok(())
}

/// With the bias gradient's reductions.
pub(crate) fn conv_weight_grad(b: &WgpuBackend) -> Result<()> {
    conv_backward(b, Conv2dWanted { x: false, weight: true, bias: true })
}

pub(crate) fn conv_input_grad(b: &WgpuBackend) -> Result<()> {
    conv_backward(b, Conv2dWanted { x: true, weight: false, bias: false })
}

fn conv_backward(b: &WgpuBackend, wanted: Conv2dWanted) -> Result<()> {
    let a = conv_args();
    let d = Dims::of(&a);
    let (x, w, grad) = (upload(b, d.input)?, upload(b, d.weight)?, upload(b, d.output)?);
    b.conv2d_backward(&x, &w, &grad, &a, wanted)?;
    Ok(())
}

pub(crate) fn conv_direct_forward(b: &WgpuBackend) -> Result<()> {
    conv_direct(b, |b, [x, w, _], a, d| b.conv2d_direct_forward(x, w, None, a, d))
}

pub(crate) fn conv_direct_input_grad(b: &WgpuBackend) -> Result<()> {
    conv_direct(b, |b, [_, w, grad], a, d| b.conv2d_direct_input_grad(w, grad, a, d))
}

/// With the sum of the samples' shares.
pub(crate) fn conv_direct_weight_grad(b: &WgpuBackend) -> Result<()> {
    conv_direct(b, |b, [x, _, grad], a, d| b.conv2d_direct_weight_grad(x, grad, a, d))
}

/// Runs one of the direct convolution's kernels on `conv_args()`: `kernel` gets the uploaded
/// input, weight and output gradient.
fn conv_direct(
    b: &WgpuBackend,
    kernel: impl Fn(&WgpuBackend, [&WgpuStorage; 3], &Conv2dArgs, &Dims) -> Result<Storage>,
) -> Result<()> {
    let a = conv_args();
    let d = Dims::of(&a);
    let (x, w, grad) = (upload(b, d.input)?, upload(b, d.weight)?, upload(b, d.output)?);
    let op = "conv2d warm-up";
    kernel(b, [b.gpu(&x, DType::F32, op)?, b.gpu(&w, DType::F32, op)?, b.gpu(&grad, DType::F32, op)?], &a, &d)?;
    Ok(())
}

/// `len` values uploaded (no kernel compiles for an upload).
fn upload(b: &dyn Backend, len: usize) -> Result<Storage> {
    b.from_f32(&vec![0.5; len])
}

pub(crate) fn random_normal(b: &WgpuBackend) -> Result<()> {
    b.random(RandomKind::Normal, 8, 1).map(drop)
}

/// A value other than zero (a loss gradient's seed of one): zeros are cleared, not filled.
pub(crate) fn fill(b: &WgpuBackend) -> Result<()> {
    b.full(8, 1.0).map(drop)
}

pub(crate) fn index_select(b: &WgpuBackend) -> Result<()> {
    let args = IndexArgs { outer: 1, len: 4, inner: 2, count: 2 };
    b.index_select(&upload(b, 8)?, &b.from_u32(&[1, 3])?, &args).map(drop)
}

/// Four elements: the vec4 kernel...
pub(crate) fn relu(b: &WgpuBackend) -> Result<()> {
    relu_of(b, 4)
}

/// ...and three, the one-element kernel (a separate work, so that both compile at once).
pub(crate) fn relu_tail(b: &WgpuBackend) -> Result<()> {
    relu_of(b, 3)
}

fn relu_of(b: &WgpuBackend, len: usize) -> Result<()> {
    b.unary(UnaryOp::Relu, &upload(b, len)?, len).map(drop)
}

/// As `relu` and `relu_tail`.
pub(crate) fn relu_backward(b: &WgpuBackend) -> Result<()> {
    relu_backward_of(b, 4)
}

pub(crate) fn relu_backward_tail(b: &WgpuBackend) -> Result<()> {
    relu_backward_of(b, 3)
}

fn relu_backward_of(b: &WgpuBackend, len: usize) -> Result<()> {
    b.unary_backward(UnaryOp::Relu, &upload(b, len)?, &upload(b, len)?, &upload(b, len)?, len).map(drop)
}

/// 2×2 windows of stride 2 over `conv_args()`'s input.
fn pool_geom() -> ConvGeom {
    let geom = conv_args().geom;
    ConvGeom { kernel_h: 2, kernel_w: 2, stride_h: 2, stride_w: 2, pad_h: 0, pad_w: 0, out_h: 4, out_w: 4, ..geom }
}

pub(crate) fn max_pool(b: &WgpuBackend) -> Result<()> {
    let geom = pool_geom();
    b.max_pool2d(&upload(b, geom.batch * geom.channels * geom.in_h * geom.in_w)?, &geom).map(drop)
}

pub(crate) fn max_pool_backward(b: &WgpuBackend) -> Result<()> {
    let geom = pool_geom();
    let outputs = geom.batch * geom.channels * geom.out_h * geom.out_w;
    b.max_pool2d_backward(&upload(b, outputs)?, &b.from_u32(&vec![0; outputs])?, &geom).map(drop)
}

/// [2, 3] @ [3, 2]: one invocation per output (also the stand-in for the tiled kernels).
pub(crate) fn matmul_small(b: &WgpuBackend) -> Result<()> {
    let args = MatmulArgs {
        batch: 1,
        m: 2,
        k: 3,
        n: 2,
        lhs: MatrixLayout::row_major(2, 3),
        rhs: MatrixLayout::row_major(3, 2),
    };
    b.matmul(&upload(b, 6)?, &upload(b, 6)?, &args).map(drop)
}

/// Four elements: the vec4 kernel...
pub(crate) fn binary(b: &WgpuBackend) -> Result<()> {
    binary_of(b, 4)
}

/// ...and three, the one-element kernel (a work of its own, as `relu_tail`)...
pub(crate) fn binary_tail(b: &WgpuBackend) -> Result<()> {
    binary_of(b, 3)
}

fn binary_of(b: &WgpuBackend, len: usize) -> Result<()> {
    let layout = Layout::contiguous(&[len]);
    b.binary(BinaryOp::Add, &upload(b, len)?, &layout, &upload(b, len)?, &layout).map(drop)
}

/// ...and a broadcast scalar on the left (a loss gradient)...
pub(crate) fn binary_splat_lhs(b: &WgpuBackend) -> Result<()> {
    binary_splat(b, true)
}

/// ...or on the right (a bias).
pub(crate) fn binary_splat_rhs(b: &WgpuBackend) -> Result<()> {
    binary_splat(b, false)
}

fn binary_splat(b: &WgpuBackend, lhs: bool) -> Result<()> {
    let scalar = Layout::contiguous(&[1]).broadcast_to(&[8])?;
    let eight = Layout::contiguous(&[8]);
    let (one, y) = (upload(b, 1)?, upload(b, 8)?);
    if lhs {
        b.binary(BinaryOp::Mul, &one, &scalar, &y, &eight).map(drop)
    } else {
        b.binary(BinaryOp::Mul, &y, &eight, &one, &scalar).map(drop)
    }
}

/// Two rows of ten classes (the short-row kernels).
const CROSS_ENTROPY: CrossEntropyArgs =
    CrossEntropyArgs { rows: 2, classes: 10, smoothing: 0.0, weighted: false, ignore_index: None };

pub(crate) fn cross_entropy(b: &WgpuBackend) -> Result<()> {
    b.cross_entropy(&upload(b, 20)?, &b.from_u32(&[1, 7])?, None, &CROSS_ENTROPY).map(drop)
}

pub(crate) fn cross_entropy_backward(b: &WgpuBackend) -> Result<()> {
    b.cross_entropy_backward(&upload(b, 20)?, &b.from_u32(&[1, 7])?, None, &upload(b, 2)?, &CROSS_ENTROPY).map(drop)
}

/// Sums over a batch axis (bias gradients)...
pub(crate) fn reduce_columns(b: &WgpuBackend) -> Result<()> {
    b.reduce(ReduceOp::Sum, &upload(b, 8)?, ReduceDims { outer: 1, len: 2, inner: 4 }).map(drop)
}

/// ...and along rows longer than the short-row kernels take (a convolution's bias gradient).
/// Rows of a multiple of 4 (read as vec4s) and others.
pub(crate) fn reduce_rows(b: &WgpuBackend) -> Result<()> {
    b.reduce(ReduceOp::Sum, &upload(b, 128)?, ReduceDims { outer: 2, len: 64, inner: 1 })?;
    b.reduce(ReduceOp::Sum, &upload(b, 130)?, ReduceDims { outer: 2, len: 65, inner: 1 }).map(drop)
}

/// Gradient clipping's sum of squares (a transformer's training step clips).
pub(crate) fn sum_squares(b: &WgpuBackend) -> Result<()> {
    b.sum_squares(&[(&upload(b, 8)?, 8)]).map(drop)
}

/// The strided copy that makes a transposed or sliced view contiguous.
pub(crate) fn copy_strided(b: &WgpuBackend) -> Result<()> {
    let (src, dst) = (upload(b, 6)?, upload(b, 6)?);
    let transposed = Layout::contiguous(&[2, 3]).permute(&[1, 0])?;
    b.copy_strided(&src, &transposed, &dst, &Layout::contiguous(&[3, 2]))
}

/// Causal attention with heads of 64 (a GPT's 384 wide over 6 heads): the fused forward...
const ATTENTION: AttentionArgs =
    AttentionArgs { batch: 1, tq: 2, tk: 2, d: 64, scale: 0.125, causal: true, layout: AttentionLayout::Separate };

pub(crate) fn attention_forward(b: &WgpuBackend) -> Result<()> {
    let x = upload(b, 128)?;
    b.attention_forward(&x, &x, &x, &ATTENTION).map(drop)
}

/// ...and its two backward kernels.
pub(crate) fn attention_backward(b: &WgpuBackend) -> Result<()> {
    let (x, lse) = (upload(b, 128)?, upload(b, 2)?);
    b.attention_backward(&x, &x, &x, &x, &lse, &x, &ATTENTION).map(drop)
}

/// A layer norm over rows of 8 with a weight and a bias, forward and input gradient.
const LAYER_NORM: LayerNormArgs = LayerNormArgs { rows: 2, cols: 8, eps: 1e-5 };

pub(crate) fn layer_norm(b: &WgpuBackend) -> Result<()> {
    let (x, w) = (upload(b, 16)?, upload(b, 8)?);
    b.layer_norm(&x, Some(&w), Some(&w), &LAYER_NORM).map(drop)
}

pub(crate) fn layer_norm_backward(b: &WgpuBackend) -> Result<()> {
    let (x, w, stats) = (upload(b, 16)?, upload(b, 8)?, upload(b, 2)?);
    b.layer_norm_backward(&x, Some(&w), &stats, &stats, &x, &LAYER_NORM).map(drop)
}

/// The layer norm's weight and bias gradients.
pub(crate) fn layer_norm_param_grads(b: &WgpuBackend) -> Result<()> {
    let (x, stats) = (upload(b, 16)?, upload(b, 2)?);
    b.layer_norm_param_grads(&x, &stats, &stats, &x, &LAYER_NORM).map(drop)
}

/// A training batch norm of [2, 3, 4] (four values per invocation) and of [2, 3, 1] (one):
/// every entry point of the forward kernels...
const BATCH_NORM: BatchNormArgs =
    BatchNormArgs { batch: 2, channels: 3, inner: 4, eps: 1e-5, batch_stats: true, relu: false };
const BATCH_NORM_1D: BatchNormArgs = BatchNormArgs { inner: 1, ..BATCH_NORM };

pub(crate) fn batch_norm(b: &WgpuBackend) -> Result<()> {
    let (x, w) = (upload(b, 24)?, upload(b, 3)?);
    b.batch_norm(&x, Some(&w), Some(&w), None, &BATCH_NORM)?;
    b.batch_norm(&x, Some(&w), Some(&w), None, &BATCH_NORM_1D).map(drop)
}

/// ...of the backward's...
pub(crate) fn batch_norm_backward(b: &WgpuBackend) -> Result<()> {
    let (x, w) = (upload(b, 24)?, upload(b, 3)?);
    b.batch_norm_backward(&x, Some(&w), Some(&w), &w, &w, &x, &BATCH_NORM)?;
    b.batch_norm_backward(&x, Some(&w), Some(&w), &w, &w, &x, &BATCH_NORM_1D).map(drop)
}

/// ...and the running statistics' update.
pub(crate) fn batch_norm_running(b: &WgpuBackend) -> Result<()> {
    let stats = [upload(b, 3)?, upload(b, 3)?, upload(b, 3)?, upload(b, 3)?];
    b.batch_norm_update_running(&stats[0], &stats[1], &stats[2], &stats[3], 0.1, &BATCH_NORM)
}

/// One fused Adam update, the kernel every LeNet step ends with, on the one-parameter module
/// that stands in until...
pub(crate) fn adam_update_stand_in(b: &WgpuBackend) -> Result<()> {
    adam(b, true)
}

/// ...the module of as many parameters as the adapter binds is compiled.
pub(crate) fn adam_update(b: &WgpuBackend) -> Result<()> {
    adam(b, false)
}

fn adam(b: &WgpuBackend, one_slot: bool) -> Result<()> {
    let (param, grad, m, v) = (upload(b, 8)?, upload(b, 8)?, upload(b, 8)?, upload(b, 8)?);
    let step = OptimizerStep::Adam {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
        step: 1,
    };
    let update = OptimizerUpdate { step, param: &param, grad: &grad, state: &[&m, &v], len: 8 };
    b.optimizer_updates(&[update], one_slot)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Every work runs once, across the threads, and `wait` returns once they all have ended.
    #[test]
    fn the_threads_run_every_work_once_and_are_waited_for() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let backend = Arc::new(WgpuBackend::independent().unwrap());
        let runs = Arc::new(AtomicUsize::new(0));
        let works = (0..3 * THREADS + 1)
            .map(|_| {
                let runs = runs.clone();
                Box::new(move || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }) as Work
            })
            .collect();
        spawn(&backend, works);
        assert!(wait(Duration::from_secs(60)), "the warm-up threads did not finish");
        assert_eq!(runs.load(Ordering::SeqCst), 3 * THREADS + 1);
        assert_eq!(backend.pipelines.warming().load(Ordering::SeqCst), 0);
    }

    /// Works counting their runs, each also noting a training step, which a warm-up thread's
    /// own optimizer steps must not count as.
    fn counted(runs: &Arc<AtomicUsize>, backend: &Arc<WgpuBackend>, n: usize) -> Vec<Work> {
        (0..n)
            .map(|_| {
                let (runs, backend) = (runs.clone(), backend.clone());
                Box::new(move || {
                    backend.pipelines.note_training_step();
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }) as Work
            })
            .collect()
    }

    /// Once the program (not the warm-up) has stepped an optimizer, the threads take no new work.
    #[test]
    fn a_training_step_ends_the_warm_up() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let backend = Arc::new(WgpuBackend::independent().unwrap());
        let runs = Arc::new(AtomicUsize::new(0));
        spawn(&backend, counted(&runs, &backend, 2 * THREADS));
        assert!(wait(Duration::from_secs(60)), "the warm-up threads did not finish");
        assert_eq!(runs.load(Ordering::SeqCst), 2 * THREADS, "a warm-up thread's step ended the warm-up");
        backend.pipelines.note_training_step();
        runs.store(0, Ordering::SeqCst);
        spawn(&backend, counted(&runs, &backend, 2 * THREADS));
        assert!(wait(Duration::from_secs(60)), "the warm-up threads did not finish");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "works ran after a training step");
    }
}
