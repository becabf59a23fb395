//! Start-up warm-up: compiles the kernels a training run needs, in the background, as soon as the
//! wgpu device exists.
//!
//! Measured on the H200, the first LeNet step took 0.34 s, nearly all of it compiling about 25
//! pipelines one after another, which made a cold first epoch 1.45x a steady one. Here
//! `THREADS` threads run tiny ops that touch those kernels, a training step's own first
//! (the longest to compile first), so the driver compiles them in parallel while the program
//! is still loading its data; a kernel a later op needs is then already in the cache (or being compiled, and the op
//! waits for it).
//!
//! Until the slow kernels are compiled (the fused convolution's, the tiled matmuls, the row
//! reduction: 0.1-0.5 s each), ops run stand-ins that compile in 5-50 ms and compute the same
//! values (see `Pipelines::stand_in`), so a cold first LeNet step starts after 25-55 ms, not
//! ~170. Those first steps' results differ from a warm process's by float rounding only; for
//! runs that must repeat bit for bit, `RUMUS_WGPU_WARMUP=0` turns the warm-up, and with it the
//! stand-ins, off (every kernel then compiles on first use).
//!
//! The warm-up reads nothing back to the host (the transfer count stays untouched), ignores its
//! own errors (it is only an optimisation; real ops report theirs) and runs only on hardware
//! adapters, not on CPU emulations such as lavapipe. `RUMUS_WGPU_WARMUP=0` turns it off.
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
    Backend, BinaryOp, Conv2dArgs, Conv2dWanted, ConvGeom, CrossEntropyArgs, DType, IndexArgs, MatmulArgs,
    MatrixLayout, OptimizerStep, RandomKind, ReduceDims, ReduceOp, Storage, UnaryOp,
};
use crate::nn::{Linear, MaxPool2d, Module};
use crate::optim::{Adam, Optimizer};
use crate::{Device, Layout, RawTensor, Result};

/// Warm-up threads still running, and the signal that one finished.
static RUNNING: Mutex<usize> = Mutex::new(0);
static FINISHED: Condvar = Condvar::new();
/// The longest an exiting process waits for the warm-up (which takes about 0.2 s on the H200).
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

/// A work: one or a few tiny ops that make the backend compile their kernels.
type Work = fn(&Device) -> Result<()>;

/// The works, `THREADS` threads taking them from the front in turn so that the driver compiles
/// that many kernels at once:
/// - first a training step's small kernels (5-50 ms each on the H200), one per work so that
///   none waits behind another, the longest to compile first (the direct convolution's
///   input gradient, the stand-in until the fused convolution is compiled, took 50 ms; `fill`
///   4 ms): a first step waits for the last of them to finish, and starting the long ones
///   early made that 25-36 ms, not 32-41;
/// - then the kernels that replace the stand-ins: the fused convolution's three (~0.2 s
///   each), the 64-tile matmuls and the row reduction;
/// - then whole small forward/backward passes that reach what the first works did not, and
///   the large-tile matmuls (up to 0.5 s), which only large products use.
const WORKS: &[Work] = &[
    random_normal,
    conv_direct_input_grad,
    conv_direct_forward,
    max_pool_backward,
    relu,
    conv_direct_weight_grad,
    cross_entropy_backward,
    matmul_small,
    max_pool,
    relu_backward,
    cross_entropy,
    reduce_columns,
    index_select,
    binary,
    copy_strided,
    adam_update,
    fill,
    conv_forward,
    conv_input_grad,
    conv_weight_grad,
    matmul_medium,
    matmul_medium_strided,
    reduce_rows,
    optimizer,
    batch_cutting,
    pooling,
    classifier_head,
    row_kernels,
    matmul_large_vec4,
    matmul_large_strided,
];

/// Compiles at once: more made each compile slower than it saved (twelve at once made the
/// strided 128-tile matmul take 0.36 s, not 0.22).
const THREADS: usize = 10;

/// Starts the warm-up threads (detached; they finish within a fraction of a second).
pub(crate) fn start(backend: &Arc<WgpuBackend>) {
    if std::env::var("RUMUS_WGPU_WARMUP").is_ok_and(|v| v.trim() == "0") {
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
    let next = Arc::new(AtomicUsize::new(0));
    let device = Device::Wgpu(backend.clone());
    for _ in 0..THREADS {
        let (device, next) = (device.clone(), next.clone());
        let running = Running::new(backend);
        // Without threads the kernels simply compile on first use (a failed spawn drops
        // `running` with the closure).
        let _ = std::thread::Builder::new().name("rumus-warmup".into()).spawn(move || {
            let _running = running;
            Pipelines::mark_warmup_thread();
            while let Some(work) = WORKS.get(next.fetch_add(1, Ordering::Relaxed)) {
                let _ = work(&device);
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

fn conv_forward(device: &Device) -> Result<()> {
    let (b, a) = (device.backend(), conv_args());
    let d = Dims::of(&a);
    let (x, w, bias) = (upload(b, d.input)?, upload(b, d.weight)?, upload(b, a.out_channels)?);
    b.conv2d(&x, &w, Some(&bias), &a)?;
    Ok(())
}

/// With the bias gradient's reductions.
fn conv_weight_grad(device: &Device) -> Result<()> {
    conv_backward(device, Conv2dWanted { x: false, weight: true, bias: true })
}

fn conv_input_grad(device: &Device) -> Result<()> {
    conv_backward(device, Conv2dWanted { x: true, weight: false, bias: false })
}

fn conv_backward(device: &Device, wanted: Conv2dWanted) -> Result<()> {
    let (b, a) = (device.backend(), conv_args());
    let d = Dims::of(&a);
    let (x, w, grad) = (upload(b, d.input)?, upload(b, d.weight)?, upload(b, d.output)?);
    b.conv2d_backward(&x, &w, &grad, &a, wanted)?;
    Ok(())
}

fn conv_direct_forward(device: &Device) -> Result<()> {
    conv_direct(device, |b, [x, w, _], a, d| b.conv2d_direct_forward(x, w, None, a, d))
}

fn conv_direct_input_grad(device: &Device) -> Result<()> {
    conv_direct(device, |b, [_, w, grad], a, d| b.conv2d_direct_input_grad(w, grad, a, d))
}

/// With the sum of the samples' shares.
fn conv_direct_weight_grad(device: &Device) -> Result<()> {
    conv_direct(device, |b, [x, _, grad], a, d| b.conv2d_direct_weight_grad(x, grad, a, d))
}

/// Runs one of the direct convolution's kernels on `conv_args()`: `kernel` gets the uploaded
/// input, weight and output gradient.
fn conv_direct(
    device: &Device,
    kernel: impl Fn(&WgpuBackend, [&WgpuStorage; 3], &Conv2dArgs, &Dims) -> Result<Storage>,
) -> Result<()> {
    let Device::Wgpu(b) = device else { return Ok(()) };
    let a = conv_args();
    let d = Dims::of(&a);
    let (x, w, grad) = (upload(&**b, d.input)?, upload(&**b, d.weight)?, upload(&**b, d.output)?);
    let op = "conv2d warm-up";
    kernel(b, [b.gpu(&x, DType::F32, op)?, b.gpu(&w, DType::F32, op)?, b.gpu(&grad, DType::F32, op)?], &a, &d)?;
    Ok(())
}

/// `len` values uploaded (no kernel compiles for an upload).
fn upload(b: &dyn Backend, len: usize) -> Result<Storage> {
    b.from_f32(&vec![0.5; len])
}

fn random_normal(device: &Device) -> Result<()> {
    device.backend().random(RandomKind::Normal, 8, 1).map(drop)
}

fn fill(device: &Device) -> Result<()> {
    device.backend().full(8, 0.0).map(drop)
}

fn index_select(device: &Device) -> Result<()> {
    let b = device.backend();
    let args = IndexArgs { outer: 1, len: 4, inner: 2, count: 2 };
    b.index_select(&upload(b, 8)?, &b.from_u32(&[1, 3])?, &args).map(drop)
}

fn relu(device: &Device) -> Result<()> {
    let b = device.backend();
    b.unary(UnaryOp::Relu, &upload(b, 8)?, 8).map(drop)
}

fn relu_backward(device: &Device) -> Result<()> {
    let b = device.backend();
    b.unary_backward(UnaryOp::Relu, &upload(b, 8)?, &upload(b, 8)?, &upload(b, 8)?, 8).map(drop)
}

/// 2×2 windows of stride 2 over `conv_args()`'s input.
fn pool_geom() -> ConvGeom {
    let geom = conv_args().geom;
    ConvGeom { kernel_h: 2, kernel_w: 2, stride_h: 2, stride_w: 2, pad_h: 0, pad_w: 0, out_h: 4, out_w: 4, ..geom }
}

fn max_pool(device: &Device) -> Result<()> {
    let b = device.backend();
    let geom = pool_geom();
    b.max_pool2d(&upload(b, geom.batch * geom.channels * geom.in_h * geom.in_w)?, &geom).map(drop)
}

fn max_pool_backward(device: &Device) -> Result<()> {
    let b = device.backend();
    let geom = pool_geom();
    let outputs = geom.batch * geom.channels * geom.out_h * geom.out_w;
    b.max_pool2d_backward(&upload(b, outputs)?, &b.from_u32(&vec![0; outputs])?, &geom).map(drop)
}

/// [2, 3] @ [3, 2]: one invocation per output (also the stand-in for the tiled kernels).
fn matmul_small(device: &Device) -> Result<()> {
    let b = device.backend();
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

fn binary(device: &Device) -> Result<()> {
    let b = device.backend();
    let layout = Layout::contiguous(&[8]);
    b.binary(BinaryOp::Add, &upload(b, 8)?, &layout, &upload(b, 8)?, &layout).map(drop)
}

/// Two rows of ten classes (the short-row kernels).
const CROSS_ENTROPY: CrossEntropyArgs = CrossEntropyArgs { rows: 2, classes: 10, smoothing: 0.0 };

fn cross_entropy(device: &Device) -> Result<()> {
    let b = device.backend();
    b.cross_entropy(&upload(b, 20)?, &b.from_u32(&[1, 7])?, &CROSS_ENTROPY).map(drop)
}

fn cross_entropy_backward(device: &Device) -> Result<()> {
    let b = device.backend();
    b.cross_entropy_backward(&upload(b, 20)?, &b.from_u32(&[1, 7])?, &upload(b, 2)?, &CROSS_ENTROPY).map(drop)
}

/// Sums over a batch axis (bias gradients)...
fn reduce_columns(device: &Device) -> Result<()> {
    let b = device.backend();
    b.reduce(ReduceOp::Sum, &upload(b, 8)?, ReduceDims { outer: 1, len: 2, inner: 4 }).map(drop)
}

/// ...and along rows longer than the short-row kernels take (a convolution's bias gradient).
fn reduce_rows(device: &Device) -> Result<()> {
    let b = device.backend();
    b.reduce(ReduceOp::Sum, &upload(b, 128)?, ReduceDims { outer: 2, len: 64, inner: 1 }).map(drop)
}

/// A tensor of normal values drawn on the host, so that no work waits for the random kernels.
fn upload_normal(shape: &[usize], seed: u32, device: &Device) -> Result<RawTensor> {
    let len = shape.iter().product::<usize>() as u32;
    RawTensor::from_vec((0..len).map(|i| crate::rng::normal(seed, i)).collect(), shape, device)
}

/// Cutting a batch out of a dataset resident on the device (row gather), first, as a training
/// loop's first step does, then summing losses and drawing random numbers.
fn batch_cutting(device: &Device) -> Result<()> {
    let data = RawTensor::zeros(&[8, 1, 4, 4], device)?;
    let idx = RawTensor::from_indices(&[3, 1, 4], &[3], device)?;
    data.index_select(0, &idx)?.sum_all()?.add(&RawTensor::zeros(&[], device)?)?;
    RawTensor::randn(&[8], 0.0, 1.0, 12, device)?;
    Ok(())
}

/// Max pooling and relu, forward and backward.
fn pooling(device: &Device) -> Result<()> {
    let pool = MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1));
    let x = upload_normal(&[2, 3, 8, 8], 3, device)?.requires_grad_()?;
    pool.forward_raw(&x.relu()?)?.mean_all()?.backward()?;
    Ok(())
}

/// A linear layer under cross-entropy, forward and backward (the small-side matmul).
fn classifier_head(device: &Device) -> Result<()> {
    let head = Linear::new(device, 12, 10, true, 4)?;
    let x = upload_normal(&[2, 12], 5, device)?;
    let targets = RawTensor::from_indices(&[1, 7], &[2], device)?;
    head.forward_raw(&x)?.cross_entropy(&targets, 0.0)?.backward()?;
    Ok(())
}

/// The strided copy that makes a transposed or sliced view contiguous.
fn copy_strided(device: &Device) -> Result<()> {
    let b = device.backend();
    let (src, dst) = (upload(b, 6)?, upload(b, 6)?);
    let transposed = Layout::contiguous(&[2, 3]).permute(&[1, 0])?;
    b.copy_strided(&src, &transposed, &dst, &Layout::contiguous(&[3, 2]))
}

/// One fused Adam update, the kernel every LeNet step ends with.
fn adam_update(device: &Device) -> Result<()> {
    let b = device.backend();
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
    b.optimizer_step(&step, &param, &grad, &[&m, &v], 8)
}

/// A layer's forward, backward and `Adam` step over its parameters (state buffers start as
/// zeros): what surrounds the update `adam_update` compiles.
fn optimizer(device: &Device) -> Result<()> {
    let layer = Linear::new(device, 4, 4, true, 6)?;
    let x = upload_normal(&[2, 4], 7, device)?;
    let grads = layer.forward_raw(&x)?.sum_all()?.backward()?;
    let mut params = Vec::new();
    layer.visit_params("", &mut |n, p| params.push((n.to_string(), p.clone())));
    Adam::new(1e-3).step(&params, &grads)
}

/// The 64-tile matmul with vec4 loads (sides that are multiples of 4), forward and backward...
fn matmul_medium(device: &Device) -> Result<()> {
    matmul(device, 1, 64, 32, 64)
}

/// ...and the strided one for other sides (a convolution's k = channels × 5 × 5, say).
fn matmul_medium_strided(device: &Device) -> Result<()> {
    matmul(device, 1, 64, 30, 64)
}

/// The large-tile matmuls, for products of at least 256 tiles of 128×128: with vec4 loads...
fn matmul_large_vec4(device: &Device) -> Result<()> {
    matmul(device, 256, 128, 4, 128)
}

/// ...and strided.
fn matmul_large_strided(device: &Device) -> Result<()> {
    matmul(device, 256, 128, 3, 128)
}

fn matmul(device: &Device, batch: usize, m: usize, k: usize, n: usize) -> Result<()> {
    let a = upload_normal(&[batch, m, k], 8, device)?.requires_grad_()?;
    let b = upload_normal(&[k, n], 9, device)?.requires_grad_()?;
    a.matmul(&b)?.sum_all()?.backward()?;
    Ok(())
}

/// Softmax and reductions (short and long rows), common elementwise functions.
fn row_kernels(device: &Device) -> Result<()> {
    for cols in [10, 3000] {
        let x = upload_normal(&[4, cols], 10, device)?.requires_grad_()?;
        let y = x.log_softmax(-1)?.add(&x.softmax(-1)?)?;
        y.mean(&[0], false)?.max(&[0], false)?.sum_all()?.backward()?;
        x.argmax(-1)?;
    }
    let x = upload_normal(&[8, 16], 11, device)?.requires_grad_()?;
    let y = x.sigmoid()?.mul(&x.tanh()?)?.add(&x.gelu()?)?.div(&x.exp()?)?;
    y.sub(&x.mul_scalar(0.5)?)?.mean_all()?.backward()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The warm-up ignores its errors, so a work that fails would silently compile nothing.
    #[test]
    fn every_work_runs_on_wgpu() {
        let Some(device) = crate::testing::wgpu_or_skip() else { return };
        for (k, work) in super::WORKS.iter().enumerate() {
            work(&device).unwrap_or_else(|e| panic!("warm-up work {k}: {e}"));
        }
        device.synchronize().unwrap();
    }
}
