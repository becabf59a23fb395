//! A full training step on wgpu tensors — forward, loss, backward, a fused optimizer kernel on
//! every parameter — makes no device → host transfer until the loss is read, and lands on the
//! same parameters as the CPU, both with the kernel called directly and through `optim::Adam`.
//! In a child process of its own: the transfer counter is process-wide.

use rumus::backend::wgpu::transfer_count;
use rumus::backend::OptimizerStep;
use rumus::nn::{named_params, Linear, Module, Param, Sequential};
use rumus::optim::{Adam, Optimizer};
use rumus::testing::wgpu_or_skip;
use rumus::{Device, RawTensor, Result};

use crate::common::{in_child, run_child, test_path};

const BATCH: usize = 32;
const FEATURES: usize = 20;
const CLASSES: usize = 10;

struct Setup {
    model: Sequential,
    params: Vec<(String, Param)>,
    state: Vec<[RawTensor; 2]>,
    x: RawTensor,
    targets: RawTensor,
}

fn setup(device: &Device) -> Result<Setup> {
    let mut model = Sequential::new();
    model.push(Box::new(Linear::new(device, FEATURES, 16, true, 1)?));
    model.push(Box::new(rumus::nn::Relu));
    model.push(Box::new(Linear::new(device, 16, CLASSES, true, 2)?));
    let params = named_params(&model);
    let state = params
        .iter()
        .map(|(_, p)| Ok([RawTensor::zeros(p.shape(), device)?, RawTensor::zeros(p.shape(), device)?]))
        .collect::<Result<Vec<_>>>()?;
    let mut rng = rumus::rng::Rng::new(5);
    let xs: Vec<f32> = (0..BATCH * FEATURES).map(|_| rng.uniform() * 2.0 - 1.0).collect();
    let targets: Vec<u32> = (0..BATCH).map(|_| rng.below(CLASSES) as u32).collect();
    Ok(Setup {
        model,
        params,
        state,
        x: RawTensor::from_vec(xs, &[BATCH, FEATURES], device)?,
        targets: RawTensor::from_indices(&targets, &[BATCH], device)?,
    })
}

/// Forward, cross-entropy, backward and one Adam step; returns the loss tensor.
fn step(s: &Setup, t: u32) -> Result<RawTensor> {
    let logits = s.model.forward_raw(&s.x)?;
    let loss = logits.cross_entropy(&s.targets, 0.0)?;
    let grads = loss.backward()?;
    let adam = OptimizerStep::Adam {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
        step: t,
    };
    for ((name, p), [m, v]) in s.params.iter().zip(&s.state) {
        let g = grads.get(p.tensor()).ok_or_else(|| rumus::Error::Autograd(format!("no gradient for {name}")))?;
        let g = g.contiguous()?;
        let backend = p.tensor().device().backend();
        backend.optimizer_step(
            &adam,
            p.tensor().storage(),
            g.storage(),
            &[m.storage(), v.storage()],
            p.tensor().numel(),
        )?;
    }
    Ok(loss)
}

#[test]
fn training_step_makes_no_hidden_transfers_and_matches_cpu() -> Result<()> {
    if !in_child() {
        run_child(&test_path(module_path!(), "training_step_makes_no_hidden_transfers_and_matches_cpu"), &[]);
        return Ok(());
    }
    let Some(gpu) = wgpu_or_skip() else {
        return Ok(());
    };
    let on_gpu = setup(&gpu)?;
    let on_cpu = setup(&Device::cpu())?;

    let before = transfer_count();
    let loss = step(&on_gpu, 1)?;
    let loss2 = step(&on_gpu, 2)?;
    assert_eq!(transfer_count(), before, "a training step read data back to the host");
    let first = loss.item()?;
    assert_eq!(transfer_count(), before + 1, "reading the loss is exactly one transfer");

    let cpu_first = step(&on_cpu, 1)?.item()?;
    let cpu_second = step(&on_cpu, 2)?.item()?;
    assert!((first - cpu_first).abs() < 1e-4, "loss: wgpu {first}, cpu {cpu_first}");
    let second = loss2.item()?;
    assert!((second - cpu_second).abs() < 1e-4, "second loss: wgpu {second}, cpu {cpu_second}");
    assert!(second < first, "the optimizer step should lower the loss: {first} -> {second}");
    for ((name, g), (_, c)) in on_gpu.params.iter().zip(&on_cpu.params) {
        for (i, (a, b)) in g.to_vec()?.iter().zip(c.to_vec()?).enumerate() {
            assert!((a - b).abs() < 1e-4, "{name}[{i}] after two steps: wgpu {a}, cpu {b}");
        }
    }

    // The same through the library optimizer (state created lazily on the parameter's device).
    let (lib_gpu, lib_cpu) = (setup(&gpu)?, setup(&Device::cpu())?);
    let (mut opt_gpu, mut opt_cpu) = (Adam::new(1e-2), Adam::new(1e-2));
    let before = transfer_count();
    let mut losses = Vec::new();
    for _ in 0..3 {
        let loss = lib_gpu.model.forward_raw(&lib_gpu.x)?.cross_entropy(&lib_gpu.targets, 0.0)?;
        opt_gpu.step(&lib_gpu.params, &loss.backward()?)?;
        losses.push(loss);
    }
    assert_eq!(transfer_count(), before, "Adam steps read data back to the host");
    for loss in &losses {
        let cpu_loss = lib_cpu.model.forward_raw(&lib_cpu.x)?.cross_entropy(&lib_cpu.targets, 0.0)?;
        opt_cpu.step(&lib_cpu.params, &cpu_loss.backward()?)?;
        let (g, c) = (loss.item()?, cpu_loss.item()?);
        assert!((g - c).abs() < 1e-4, "library Adam loss: wgpu {g}, cpu {c}");
    }
    Ok(())
}
