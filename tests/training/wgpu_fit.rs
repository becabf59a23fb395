//! End to end on wgpu: `fit` trains a small CNN (conv, max-pool, linear, cross-entropy, Adam) on
//! 2,000 MNIST images and follows the CPU's run step for step — the same seeds, the same epoch
//! losses within f32 noise — and `evaluate` agrees.

use crate::common;

use common::{mnist, SmallCnn};
use rumus::data::{ClassDataset, Dataset};
use rumus::prelude::*;
use rumus::testing::wgpu_or_skip;

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
