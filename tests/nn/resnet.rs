//! ResNet-18 (CIFAR form) declared with `#[model]` (issue #32), shared with
//! `examples/resnet_fashion.rs` and the `resnet` benchmark from `rumus_test_models`: its
//! parameter count and `state_dict` names and shapes against its PyTorch twin, and training
//! steps on a batch of 2 on the CPU and on wgpu.

use rumus::nn::{named_params, Module};
use rumus::optim::{Optimizer, Sgd};
use rumus::prelude::*;
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus_test_models::ResNet18;

/// `sum(p.numel() for p in ResNet18().parameters())` of the twin in tools/bench/torch_bench.py,
/// computed with PyTorch 2.15 (CPU): the ResNet-18 of Kuang Liu's pytorch-cifar has the same count.
const TORCH_PARAMETERS: usize = 11_173_962;
/// Its batch norms' running means and variances (`num_batches_tracked` left out): 2 × 4,800 channels.
const TORCH_RUNNING_STATS: usize = 9_600;

#[test]
fn parameter_count_equals_pytorchs() {
    assert_eq!(ResNet18::TRAINABLE_PARAMS, TORCH_PARAMETERS);
    assert_eq!(ResNet18::TOTAL_PARAMS, TORCH_PARAMETERS + TORCH_RUNNING_STATS);
    assert_eq!(ResNet18::INPUT, &[3, 32, 32]);
    assert_eq!(ResNet18::OUTPUT, &[10]);
}

/// Every entry of the state dict, in order, with its shape, against the twin's, written by
/// tests/fixtures/make_resnet_fixture.py.
#[test]
fn state_dict_names_and_shapes_equal_the_pytorch_twins() -> Result<()> {
    let model = ResNet18::new(&Device::cpu(), 1)?;
    let ours: Vec<String> = named_params(&model)
        .iter()
        .map(|(name, p)| {
            let dims: Vec<String> = p.shape().iter().map(usize::to_string).collect();
            format!("{name} {}", dims.join(","))
        })
        .collect();
    let torch = include_str!("../fixtures/torch_resnet18_state_dict.txt");
    let theirs: Vec<&str> = torch.lines().collect();
    assert_eq!(ours.len(), theirs.len(), "state dict entries");
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o, t);
    }
    let counted: usize = model.named_parameters().iter().map(|(_, p)| p.tensor().numel()).sum();
    assert_eq!(counted, TORCH_PARAMETERS);
    Ok(())
}

/// A fixed batch of 2 images and labels on `device`.
fn batch(device: &Device) -> Result<(RawTensor, RawTensor)> {
    let x = RawTensor::randn(&[2, 3, 32, 32], 0.0, 1.0, 5, &Device::cpu())?.to_device(device)?;
    let y = RawTensor::from_indices(&[3, 7], &[2], device)?;
    Ok((x, y))
}

/// The losses of `steps` SGD steps (momentum 0.9) on the fixed batch, in training mode.
fn losses(model: &ResNet18, device: &Device, steps: usize) -> Result<Vec<f32>> {
    let (x, y) = batch(device)?;
    let params = model.named_parameters();
    let mut sgd = Sgd::new(0.01).momentum(0.9);
    let mut out = Vec::new();
    for _ in 0..steps {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        let grads = loss.backward()?;
        sgd.step(&params, &grads)?;
        out.push(loss.item()?);
    }
    Ok(out)
}

#[test]
fn loss_falls_on_a_fixed_batch_on_the_cpu() -> Result<()> {
    let model = ResNet18::new(&Device::cpu(), 3)?;
    let l = losses(&model, &Device::cpu(), 3)?;
    assert!(l.iter().all(|v| v.is_finite()), "losses {l:?}");
    assert!(l[2] < 0.5 * l[0], "the loss on 2 fixed images should fall: {l:?}");
    Ok(())
}

/// The first training step on wgpu gives the CPU's loss and gradients (same seed, same initial
/// weights), and the loss is lower at the second. The stem's gradient passes back through batch
/// norms of a batch of 2 and 17 ReLUs, so float rounding (another summation order, or on a GPU
/// Winograd's transforms) can flip a few activations and move single elements of it by a
/// percent or two of its largest (on an H100 with F(4×4, 3×3) Winograd, run Y: element 14 off
/// by 1.3e-2 of the largest). So the stem's gradient is compared as a whole: its difference
/// within 5e-2 of its norm, which a wrong convolution gradient (off by whole terms) would exceed
/// many times over. On lavapipe the difference is, for seeds 6 and 4, 4e-6 and 2.7e-3 of the
/// norm on the implicit GEMM, 3.5e-6 and 1.7e-2 on F(2×2, 3×3), 1.4e-5 and 1.4e-2 on F(4×4, 3×3)
/// (`RUMUS_WGPU_CONV`).
#[test]
fn wgpu_training_steps_match_the_cpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    let (on_cpu, on_gpu) = (ResNet18::new(&cpu, 6)?, ResNet18::new(&gpu, 6)?);
    let mut sgd = Sgd::new(0.01).momentum(0.9);
    let mut step = |model: &ResNet18, device: &Device| -> Result<(f32, Vec<f32>, Vec<f32>)> {
        let (x, y) = batch(device)?;
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        let grads = loss.backward()?;
        let params = model.named_parameters();
        let grad = |name: &str| -> Result<Vec<f32>> {
            let (_, p) = params.iter().find(|(n, _)| n == name).expect("the parameter exists");
            grads.get(p.tensor()).expect("a gradient").to_vec()
        };
        let seen = (loss.item()?, grad("head.1.weight")?, grad("stem.0.weight")?);
        if device.same(&gpu) {
            sgd.step(&params, &grads)?;
        }
        Ok(seen)
    };
    let (loss_cpu, head_cpu, stem_cpu) = step(&on_cpu, &cpu)?;
    let (loss_gpu, head_gpu, stem_gpu) = step(&on_gpu, &gpu)?;
    assert_close("loss", &[loss_gpu], &[loss_cpu], 1e-3);
    assert_close("head.1.weight gradient", &head_gpu, &head_cpu, 1e-3);
    let norm = |v: &mut dyn Iterator<Item = f32>| v.map(|x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let off = norm(&mut stem_gpu.iter().zip(&stem_cpu).map(|(g, c)| g - c));
    let size = norm(&mut stem_cpu.iter().copied());
    assert!(size > 0.0 && off <= 5e-2 * size, "stem.0.weight gradient: off by {off} in norm, of {size}");
    let (second, _, _) = step(&on_gpu, &gpu)?;
    assert!(second < loss_gpu, "the loss on wgpu should fall: {loss_gpu} then {second}");
    Ok(())
}
