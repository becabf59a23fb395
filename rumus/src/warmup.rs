//! The start-up warm-up's table: which kernels a training run needs compiled, in which order,
//! started in the background when the wgpu device is first handed out ([`Device::wgpu`],
//! [`Device::best`]).
//!
//! Without it, a first training step spends nearly all its time compiling its pipelines one
//! after another (figures in BENCHMARKS.md, "Notes moved from code comments"). The backend's
//! warm-up threads (`backend/wgpu/warmup.rs`, which also says what the warm-up guarantees) run
//! the works below, a training step's own first (the longest to compile first). Most are kernel
//! works, tiny calls the backend writes with its own kernels; the rest are passes written here,
//! with ops, layers and an optimizer, that reach the kernels a whole forward and backward pass
//! uses. This module sits above `nn` and `optim` so that the backend knows nothing above it.
//!
//! Until the slow kernels are compiled (the fused convolution's, the tiled matmuls, the row
//! reduction), ops run stand-ins that compile far sooner and compute the same values, so a cold
//! first step does not wait for the slow compiles.

use std::sync::{Arc, Once};

use crate::backend::wgpu::warmup::{self as kernel, KernelWork};
use crate::backend::wgpu::WgpuBackend;
use crate::nn::{Linear, MaxPool2d, Module};
use crate::optim::{Adam, Optimizer};
use crate::{Device, RawTensor, Result};

/// One entry of the table: a kernel work of the backend's, or a pass written here.
enum Work {
    Kernel(KernelWork),
    Pass(fn(&Device) -> Result<()>),
}

use Work::{Kernel as K, Pass as P};

/// The works, the warm-up threads taking them from the front in turn so that the driver compiles
/// that many kernels at once:
/// - first a training step's small kernels, one per work so that none waits behind another
///   (the vec4 and one-element kernels of an elementwise op apart), about in the order a LeNet
///   step asks for them, the backward's longer compiles (the direct convolution's gradients,
///   stand-ins until the fused convolution is compiled) among the forward's: a first step waits
///   for each in turn;
/// - then the kernels that replace the stand-ins: the optimizer's of many parameters, the fused
///   convolution's three, the 64-tile matmuls and the row reduction; then the batch norm's
///   (quick to compile, and after what a network without batch norm needs, so that its cold
///   start does not wait for them);
/// - then whole small forward/backward passes that reach what the first works did not, and
///   the large-tile matmuls (the slowest to compile), which only large products use;
/// - last the layer norm's, gradient clipping's and the fused attention's kernels (heads of
///   64), which only transformers use.
///
/// The threads take no new work once the program has stepped an optimizer (the end of its first
/// training step): the works still waiting are for kernels that step did not use (a LeNet's:
/// the large-tile matmuls, attention and layer norm, about 1.5 s of compiles), which ran beside
/// its next steps; they compile when first used, if ever (run AD in BENCHMARKS.md).
const WORKS: &[Work] = &[
    K(kernel::random_normal),
    K(kernel::index_select),
    K(kernel::conv_direct_forward),
    K(kernel::relu),
    K(kernel::max_pool),
    K(kernel::conv_direct_input_grad),
    K(kernel::relu_backward),
    K(kernel::conv_direct_weight_grad),
    K(kernel::max_pool_backward),
    K(kernel::matmul_small),
    K(kernel::cross_entropy),
    K(kernel::cross_entropy_backward),
    K(kernel::binary),
    K(kernel::binary_splat_lhs),
    K(kernel::binary_splat_rhs),
    K(kernel::relu_tail),
    K(kernel::relu_backward_tail),
    K(kernel::binary_tail),
    K(kernel::reduce_columns),
    K(kernel::adam_update_stand_in),
    K(kernel::fill),
    K(kernel::copy_strided),
    K(kernel::adam_update),
    K(kernel::conv_forward),
    K(kernel::conv_input_grad),
    K(kernel::conv_weight_grad),
    P(matmul_medium),
    P(matmul_medium_strided),
    K(kernel::reduce_rows),
    K(kernel::batch_norm),
    K(kernel::batch_norm_backward),
    K(kernel::batch_norm_running),
    P(optimizer),
    P(batch_cutting),
    P(pooling),
    P(classifier_head),
    P(row_kernels),
    P(matmul_large_vec4),
    P(matmul_large_strided),
    P(matmul_tall),
    K(kernel::layer_norm),
    K(kernel::layer_norm_backward),
    K(kernel::layer_norm_param_grads),
    K(kernel::sum_squares),
    K(kernel::attention_forward),
    K(kernel::attention_backward),
];

/// Starts the warm-up of the shared backend once per process (the backend itself skips it on
/// CPU emulations and with `RUMUS_WGPU_WARMUP=0`).
pub(crate) fn start_once(backend: &Arc<WgpuBackend>) {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| kernel::start(backend, works(backend)));
}

/// The table bound to `backend` and its device, as the warm-up threads run it.
fn works(backend: &Arc<WgpuBackend>) -> Vec<kernel::Work> {
    let device = Device::Wgpu(backend.clone());
    WORKS
        .iter()
        .map(|work| match *work {
            Work::Kernel(k) => kernel::bind(k, backend),
            Work::Pass(pass) => {
                let device = device.clone();
                Box::new(move || pass(&device)) as kernel::Work
            }
        })
        .collect()
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

/// The tall 256×128 tile (a transformer's weight and input gradients) where the adapter has its
/// resources.
fn matmul_tall(device: &Device) -> Result<()> {
    matmul(device, 64, 512, 4, 128)
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
    /// Each kernel work compiles a kernel a fresh backend had not compiled yet (a work whose
    /// calls took a path without one, as `full` of zeros does, would warm up nothing).
    #[test]
    fn every_kernel_work_compiles_a_kernel() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        for (k, work) in super::WORKS.iter().enumerate() {
            let super::Work::Kernel(kernel) = work else { continue };
            let backend = super::WgpuBackend::independent().unwrap();
            kernel(&backend).unwrap_or_else(|e| panic!("kernel work {k}: {e}"));
            assert!(backend.compiled_kernels() > 0, "kernel work {k} compiled nothing");
        }
    }

    /// The warm-up ignores its errors, so a work that fails would silently compile nothing.
    #[test]
    fn every_work_runs_on_wgpu() {
        let Some(device) = crate::testing::wgpu_or_skip() else { return };
        let crate::Device::Wgpu(backend) = &device else { panic!("wgpu_or_skip gave {device}") };
        for (k, work) in super::works(backend).iter().enumerate() {
            work().unwrap_or_else(|e| panic!("warm-up work {k}: {e}"));
        }
        device.synchronize().unwrap();
    }
}
