//! Start-up warm-up: compiles the kernels a training run needs, in the background, as soon as the
//! wgpu device exists.
//!
//! Measured on the H200, the first LeNet step took 0.34 s, nearly all of it compiling about 25
//! pipelines one after another, which made a cold first epoch 1.45x a steady one. Here ten
//! threads run tiny forward/backward/optimizer steps that touch those kernels, so the driver
//! compiles them in parallel while the program is still loading its data; a kernel a later op
//! needs is then already in the cache (or being compiled, and the op waits for it).
//!
//! The warm-up reads nothing back to the host (the transfer count stays untouched), ignores its
//! own errors (it is only an optimisation; real ops report theirs) and runs only on hardware
//! adapters, not on CPU emulations such as lavapipe. `RUMUS_WGPU_WARMUP=0` turns it off.
//!
//! The process waits for the warm-up at exit (up to `EXIT_WAIT`): NVIDIA's driver tears itself
//! down in an exit handler, and a pipeline compile still running on another thread then
//! crashes the process (SIGSEGV or SIGABRT after the last line of output; seen on the H200 in
//! test binaries that finish in a fraction of a second).

use std::sync::{Condvar, Mutex, Once};
use std::time::{Duration, Instant};

use crate::backend::{Conv2dArgs, Conv2dWanted, ConvGeom};
use crate::nn::{Linear, MaxPool2d, Module};
use crate::optim::{Adam, Optimizer};
use crate::{Device, RawTensor, Result};

/// Warm-up threads still running, and the signal that one finished.
static RUNNING: Mutex<usize> = Mutex::new(0);
static FINISHED: Condvar = Condvar::new();
/// The longest an exiting process waits for the warm-up (which takes about 0.2 s on the H200).
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Registered with `atexit` after the driver is loaded, so it runs before the driver's handler.
extern "C" fn wait_for_warmup() {
    let deadline = Instant::now() + EXIT_WAIT;
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        running = FINISHED.wait_timeout(running, left).unwrap_or_else(|p| p.into_inner()).0;
    }
}

/// Counts one warm-up thread as running until dropped (even by a panic).
struct Running;

impl Running {
    fn new() -> Running {
        *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        FINISHED.notify_all();
    }
}

/// A work: a few tiny ops that make the backend compile a group of kernels.
type Work = fn(&Device) -> Result<()>;

/// One thread per list of works: the driver compiles each thread's kernels in turn, so many
/// small groups finish sooner than a few large ones. The convolution's kernels (about 0.2 s each
/// on the H200), which a first training step waits for, start at once on threads of their own;
/// the 128-tile matmuls, as long to compile, follow them there rather than compete with them
/// (parallel compiles slow each other: 12 at once made the strided one take 0.36 s, not 0.22).
const WORKS: [&[Work]; 10] = [
    &[conv_forward, matmul_large_vec4],
    &[conv_input_grad, matmul_large_strided],
    &[conv_weight_grad],
    &[batch_cutting],
    &[pooling],
    &[classifier_head],
    &[optimizer],
    &[matmul_medium],
    &[matmul_medium_strided],
    &[row_kernels],
];

/// Starts the warm-up threads (detached; they finish within a fraction of a second).
pub(crate) fn start(device: &Device) {
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
    for works in WORKS {
        let device = device.clone();
        let running = Running::new();
        // Without threads the kernels simply compile on first use (a failed spawn drops
        // `running` with the closure).
        let _ = std::thread::Builder::new().name("rumus-warmup".into()).spawn(move || {
            let _running = running;
            for work in works {
                let _ = work(&device);
            }
        });
    }
}

/// The fused convolution's three kernels (`conv2d.wgsl`), the largest a training run compiles,
/// each on a thread of its own: [2, 3, 8, 8] under 4 filters of 5×5 with padding 2. Their inputs
/// are uploaded, not filled, so that no other kernel's compile comes first.
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
    let b = device.backend();
    let (x, w, bias) = (b.from_f32(&[1.0; 2 * 3 * 64])?, b.from_f32(&[0.5; 4 * 3 * 25])?, b.from_f32(&[0.25; 4])?);
    b.conv2d(&x, &w, Some(&bias), &conv_args())?;
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
    let b = device.backend();
    let (x, w, grad) =
        (b.from_f32(&[1.0; 2 * 3 * 64])?, b.from_f32(&[0.5; 4 * 3 * 25])?, b.from_f32(&[0.25; 2 * 4 * 64])?);
    b.conv2d_backward(&x, &w, &grad, &conv_args(), wanted)?;
    Ok(())
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
    let x = RawTensor::randn(&[2, 3, 8, 8], 0.0, 1.0, 3, device)?.requires_grad_()?;
    pool.forward_raw(&x.relu()?)?.mean_all()?.backward()?;
    Ok(())
}

/// A linear layer under cross-entropy, forward and backward (the small-side matmul).
fn classifier_head(device: &Device) -> Result<()> {
    let head = Linear::new(device, 12, 10, true, 4)?;
    let x = RawTensor::randn(&[2, 12], 0.0, 1.0, 5, device)?;
    let targets = RawTensor::from_indices(&[1, 7], &[2], device)?;
    head.forward_raw(&x)?.cross_entropy(&targets, 0.0)?.backward()?;
    Ok(())
}

/// One Adam update (state buffers start as zeros).
fn optimizer(device: &Device) -> Result<()> {
    let layer = Linear::new(device, 4, 4, true, 6)?;
    let x = RawTensor::randn(&[2, 4], 0.0, 1.0, 7, device)?;
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

/// The 128-tile matmuls, for products of at least 256 such tiles: with vec4 loads...
fn matmul_large_vec4(device: &Device) -> Result<()> {
    matmul(device, 256, 128, 4, 128)
}

/// ...and strided.
fn matmul_large_strided(device: &Device) -> Result<()> {
    matmul(device, 256, 128, 3, 128)
}

fn matmul(device: &Device, batch: usize, m: usize, k: usize, n: usize) -> Result<()> {
    let a = RawTensor::randn(&[batch, m, k], 0.0, 1.0, 8, device)?.requires_grad_()?;
    let b = RawTensor::randn(&[k, n], 0.0, 1.0, 9, device)?.requires_grad_()?;
    a.matmul(&b)?.sum_all()?.backward()?;
    Ok(())
}

/// Softmax and reductions (short and long rows), common elementwise functions.
fn row_kernels(device: &Device) -> Result<()> {
    for cols in [10, 3000] {
        let x = RawTensor::randn(&[4, cols], 0.0, 1.0, 10, device)?.requires_grad_()?;
        let y = x.log_softmax(-1)?.add(&x.softmax(-1)?)?;
        y.mean(&[0], false)?.max(&[0], false)?.sum_all()?.backward()?;
        x.argmax(-1)?;
    }
    let x = RawTensor::randn(&[8, 16], 0.0, 1.0, 11, device)?.requires_grad_()?;
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
        for (k, work) in super::WORKS.iter().flat_map(|works| works.iter()).enumerate() {
            work(&device).unwrap_or_else(|e| panic!("warm-up work {k}: {e}"));
        }
        device.synchronize().unwrap();
    }
}
