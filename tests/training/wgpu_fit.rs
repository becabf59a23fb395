//! End to end on wgpu: `fit` trains a small CNN (conv, max-pool, linear, cross-entropy, Adam) on
//! 2,000 MNIST images and follows the CPU's run step for step — the same seeds, the same epoch
//! losses within f32 noise — and `evaluate` agrees; and the mixed-precision mode (tensor cores
//! and loss scaling) follows f32 where the adapter has tensor cores.

use crate::common;

use std::sync::Arc;

use common::{mnist, SmallCnn};
use rumus::backend::wgpu::{ConvAlgorithm, WgpuBackend};
use rumus::data::{ClassDataset, Dataset};
use rumus::nn::{join_name, Conv2d, Conv2dConfig, Linear, Module, Param};
use rumus::prelude::*;
use rumus::testing::wgpu_or_skip;
use rumus::MatmulPrecision;

/// conv 5×5 (1 => 4) → ReLU → max-pool 2 → flatten → Linear(576 => 10) on MNIST.
type TinyCnn = SmallCnn<28>;

#[test]
fn fit_on_wgpu_follows_the_cpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else {
        return Ok(());
    };
    let (train, test) = mnist();
    let (train, test) = (train.take(2000)?, test.take(500)?);
    let run = |device: &Device| -> Result<(Vec<f32>, f32, f32)> {
        let mut model = TinyCnn::new(device, 3)?;
        let cfg = Fit::epochs(2).batch_size(64).optimizer(Adam::new(2e-3)).shuffle_seed(5).verbose(Verbosity::Quiet);
        let history = model.fit(&train, cfg)?;
        let eval = model.evaluate(&test)?;
        Ok((history.get("loss").unwrap_or_default().to_vec(), eval.loss, eval.accuracy))
    };
    let (cpu_losses, cpu_loss, cpu_acc) = run(&Device::cpu())?;
    let (gpu_losses, gpu_loss, gpu_acc) = run(&gpu)?;
    println!("cpu: epoch losses {cpu_losses:?}, test loss {cpu_loss}, accuracy {cpu_acc}");
    println!("wgpu: epoch losses {gpu_losses:?}, test loss {gpu_loss}, accuracy {gpu_acc}");
    assert_eq!(gpu_losses.len(), 2);
    for (g, c) in gpu_losses.iter().zip(&cpu_losses) {
        assert!((g - c).abs() <= 2e-3 * c.abs().max(1.0), "epoch loss: wgpu {g}, cpu {c}");
    }
    assert!((gpu_loss - cpu_loss).abs() <= 5e-3 * cpu_loss.max(1.0), "test loss: wgpu {gpu_loss}, cpu {cpu_loss}");
    assert!((gpu_acc - cpu_acc).abs() <= 0.01, "test accuracy: wgpu {gpu_acc}, cpu {cpu_acc}");
    assert!(gpu_acc > 0.75, "two epochs on 2,000 images should learn: accuracy {gpu_acc}");
    Ok(())
}

/// A dataset larger than the adapter's largest binding (lavapipe: 128 MiB; full MNIST is 188 MB)
/// is gathered on the host and only the batch is uploaded, instead of failing to upload.
#[test]
fn datasets_larger_than_one_binding_are_batched_from_the_host() {
    let Some(device) = rumus::testing::wgpu_or_skip() else { return };
    let Some(limit) = device.max_tensor_bytes() else { return };
    let per = 1000;
    let count = (limit as usize / 4) / per + 8;
    let data: Vec<f32> = (0..count * per).map(|i| (i % 997) as f32).collect();
    let labels: Vec<u32> = (0..count as u32).map(|i| i % 10).collect();
    let dataset = ClassDataset::<Shape1<1000>, 10>::new(data, labels).unwrap();
    let (x, y) = dataset.get_batch(&[count - 1, 3], &device).unwrap();
    assert!(x.device().same(&device));
    let values = x.to_vec().unwrap();
    assert_eq!(values[0], (((count - 1) * per) % 997) as f32);
    assert_eq!(values[per], ((3 * per) % 997) as f32);
    assert_eq!(y.to_vec_u32().unwrap(), vec![((count - 1) % 10) as u32, 3]);
}

/// conv 3×3 (128 => 128, padding 1) → ReLU → flatten → Linear(8192 => 10) on `[128, 8, 8]` inputs:
/// a convolution wide enough for Winograd on tensor cores.
struct WideCnn {
    conv: Conv2d,
    fc: Linear,
}

impl WideCnn {
    fn new(device: &Device, seed: u64) -> Result<Self> {
        let conv = Conv2dConfig { padding: (1, 1), ..Conv2dConfig::new(128, 128, (3, 3)) };
        Ok(WideCnn {
            conv: Conv2d::new(device, conv, seed)?,
            fc: Linear::new(device, 128 * 8 * 8, 10, true, seed + 1)?,
        })
    }
}

impl Module for WideCnn {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(&self.conv.forward_raw(x)?.relu()?.flatten_from(1)?)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.conv.visit_params(&join_name(prefix, "conv"), visitor);
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "WideCnn".into()
    }
}

impl Model for WideCnn {
    type Input = Shape3<128, 8, 8>;
    type Output = Shape1<10>;
}

/// The mixed-precision mode: where the adapter has tensor cores, `fit` with
/// `MatmulPrecision::F16TensorCores` (the linear layer's products and the Winograd
/// convolution's on tensor cores) and a `LossScaler` follows the f32 run epoch by epoch on a
/// learnable synthetic task (labels from a fixed random linear teacher), and logs its scale.
/// Each run on a backend of its own, so the precision does not leak into other tests.
#[test]
fn mixed_precision_fit_on_tensor_cores_follows_f32() -> Result<()> {
    if wgpu_or_skip().is_none() {
        return Ok(());
    }
    let backend = || -> Result<WgpuBackend> { WgpuBackend::with_conv_algorithm(ConvAlgorithm::Winograd) };
    let mixed = backend()?;
    if !mixed.context().has_tensor_cores() {
        return Ok(());
    }
    mixed.set_matmul_precision(MatmulPrecision::F16TensorCores)?;
    let (n, features) = (512, 128 * 8 * 8);
    let x = RawTensor::randn(&[n, features], 0.0, 1.0, 21, &Device::cpu())?;
    let teacher = RawTensor::randn(&[features, 10], 0.0, 1.0, 22, &Device::cpu())?;
    let labels = x.matmul(&teacher)?.argmax(1)?.to_vec_u32()?;
    let data = ClassDataset::<Shape3<128, 8, 8>, 10>::new(x.to_vec()?, labels)?;
    let run = |device: Device, scaler: Option<LossScaler>| -> Result<(Vec<f32>, Option<Vec<f32>>)> {
        let mut model = WideCnn::new(&device, 5)?;
        let mut cfg =
            Fit::epochs(4).batch_size(64).optimizer(Adam::new(1e-3)).shuffle_seed(3).verbose(Verbosity::Quiet);
        if let Some(scaler) = scaler {
            cfg = cfg.loss_scaler(scaler);
        }
        let history = model.fit(&data, cfg)?;
        let losses = history.get("loss").unwrap_or_default().to_vec();
        Ok((losses, history.get("loss_scale").map(|s| s.to_vec())))
    };
    let (f32_losses, none) = run(Device::Wgpu(Arc::new(backend()?)), None)?;
    let (mixed_losses, scales) = run(Device::Wgpu(Arc::new(mixed)), Some(LossScaler::new()))?;
    println!("f32: {f32_losses:?}\nmixed: {mixed_losses:?}, loss scales {scales:?}");
    assert!(none.is_none());
    let scales = scales.expect("loss_scale in the logs");
    assert!(scales.iter().all(|s| s.is_finite() && *s >= 1.0), "{scales:?}");
    assert!(f32_losses[3] < 0.5 * f32_losses[0], "the f32 run should learn: {f32_losses:?}");
    for (m, f) in mixed_losses.iter().zip(&f32_losses) {
        assert!((m - f).abs() <= 0.05 * f.max(0.1), "epoch loss: mixed {m}, f32 {f}");
    }
    Ok(())
}
