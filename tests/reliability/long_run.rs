//! Long runs: 10,000 CPU training steps with a bounded buffer pool and flat host memory, 1,000
//! wgpu steps with a bounded buffer count, and bit-identical weights from the same seed.

use crate::common;

use common::{in_child, rss_bytes, run_child, test_path, SmallCnn};
use rumus::nn::{named_params, Linear, Module, Param};
use rumus::optim::Optimizer;
use rumus::prelude::*;
use rumus::testing::wgpu_or_skip;

/// One step of `Linear(16 => 8)` regression on a fixed batch; returns the loss tensor.
fn step(
    layer: &Linear,
    opt: &mut dyn Optimizer,
    params: &[(String, Param)],
    x: &RawTensor,
    y: &RawTensor,
) -> RawTensor {
    let loss = layer.forward_raw(x).unwrap().mse_loss(y).unwrap();
    let grads = loss.backward().unwrap();
    opt.step(params, &grads).unwrap();
    loss
}

/// Alone in a child process: the CPU buffer pool and the RSS are per process.
#[test]
fn ten_thousand_cpu_steps_keep_the_pool_bounded_and_host_memory_flat() {
    if !in_child() {
        run_child(&test_path(module_path!(), "ten_thousand_cpu_steps_keep_the_pool_bounded_and_host_memory_flat"), &[]);
        return;
    }
    let cpu = Device::cpu();
    // Batch 2,048: activations and their gradients of 16K values, so they go through the pool.
    let layer = Linear::new(&cpu, 16, 8, true, 1).unwrap();
    let params = named_params(&layer);
    let x = RawTensor::randn(&[2048, 16], 0.0, 1.0, 2, &cpu).unwrap();
    let y = RawTensor::randn(&[2048, 8], 0.0, 1.0, 3, &cpu).unwrap();
    let mut opt = Adam::new(1e-3);
    let (mut warm_pool, mut warm_rss, mut max_pool_after) = (0, 0, 0);
    let mut first_loss = 0.0;
    for s in 0..10_000 {
        let loss = step(&layer, &mut opt, &params, &x, &y);
        if s == 0 {
            first_loss = loss.item().unwrap();
        }
        let pooled = rumus::backend::cpu::pooled_bytes();
        if s < 1_000 {
            warm_pool = warm_pool.max(pooled);
        } else {
            max_pool_after = max_pool_after.max(pooled);
        }
        if s == 999 {
            warm_rss = rss_bytes().unwrap_or(0);
        }
    }
    let last_loss = step(&layer, &mut opt, &params, &x, &y).item().unwrap();
    println!("cpu: loss {first_loss} -> {last_loss}; pool {warm_pool} B warm, {max_pool_after} B max after; rss {warm_rss} -> {:?}", rss_bytes());
    assert!(last_loss < first_loss, "training should progress: {first_loss} -> {last_loss}");
    assert!(warm_pool > 0, "the pool should hold buffers of this size");
    assert!(warm_pool <= 16 << 20, "pool bounded: {warm_pool} bytes after warm-up");
    assert!(max_pool_after <= warm_pool, "the pool grew after warm-up: {warm_pool} -> {max_pool_after} bytes");
    if let Some(end_rss) = rss_bytes() {
        assert!(end_rss <= warm_rss + (8 << 20), "host memory grew over 9,000 steps: {warm_rss} -> {end_rss} bytes");
    }
}

#[test]
fn a_thousand_wgpu_steps_keep_the_buffer_count_bounded() {
    if wgpu_or_skip().is_none() {
        return;
    }
    // A backend of its own on the shared device: its pool sees only this test (not other
    // tests, nor the background kernel warm-up of hardware adapters).
    let backend = std::sync::Arc::new(rumus::backend::wgpu::WgpuBackend::with_shared_memory_reductions().unwrap());
    let gpu = Device::Wgpu(backend.clone());
    let layer = Linear::new(&gpu, 16, 8, true, 1).unwrap();
    let params = named_params(&layer);
    let x = RawTensor::randn(&[32, 16], 0.0, 1.0, 2, &gpu).unwrap();
    let y = RawTensor::randn(&[32, 8], 0.0, 1.0, 3, &gpu).unwrap();
    let mut opt = Adam::new(1e-3);
    let first_loss = step(&layer, &mut opt, &params, &x, &y).item().unwrap();
    let mut warm = backend.pool_stats();
    let mut worst = warm;
    for s in 1..1_000 {
        let loss = step(&layer, &mut opt, &params, &x, &y);
        if s % 100 == 0 {
            loss.item().unwrap(); // a sync point
        }
        let stats = backend.pool_stats();
        if s < 100 {
            warm.live_buffers = warm.live_buffers.max(stats.live_buffers);
            warm.idle_buffers = warm.idle_buffers.max(stats.idle_buffers);
        } else {
            worst.live_buffers = worst.live_buffers.max(stats.live_buffers);
            worst.idle_buffers = worst.idle_buffers.max(stats.idle_buffers);
            worst.idle_bytes = worst.idle_bytes.max(stats.idle_bytes);
        }
    }
    let last_loss = step(&layer, &mut opt, &params, &x, &y).item().unwrap();
    println!("wgpu: loss {first_loss} -> {last_loss}; warm {warm:?}, after {worst:?}");
    assert!(last_loss < first_loss, "training should progress: {first_loss} -> {last_loss}");
    assert!(worst.live_buffers <= warm.live_buffers, "live buffers grew after warm-up: {warm:?} -> {worst:?}");
    assert!(worst.idle_buffers <= warm.idle_buffers, "idle buffers grew after warm-up: {warm:?} -> {worst:?}");
    assert!(warm.live_buffers < 100 && worst.idle_bytes < 1 << 20, "{warm:?} {worst:?}");
}

#[test]
fn the_same_seed_gives_bit_identical_weights_on_the_cpu() {
    let n = 640;
    let pixels = RawTensor::rand_uniform(&[n * 256], -1.0, 1.0, 9, &Device::cpu()).unwrap().to_vec().unwrap();
    let labels: Vec<u32> = (0..n as u32).map(|i| (i * 7) % 10).collect();
    let data = ClassDataset::<Shape3<1, 16, 16>, 10>::new(pixels, labels).unwrap();
    // 10 epochs of 20 shuffled batches of 32 with Adam: 200 steps per run.
    let run = || -> Vec<(String, Vec<u32>)> {
        let mut model = SmallCnn::<16>::new(&Device::cpu(), 5).unwrap();
        let cfg = Fit::epochs(10).batch_size(32).shuffle_seed(3).optimizer(Adam::new(1e-3)).verbose(Verbosity::Quiet);
        model.fit(&data, cfg).unwrap();
        common::weights(&model).into_iter().map(|(k, v)| (k, v.iter().map(|f| f.to_bits()).collect())).collect()
    };
    let (a, b) = (run(), run());
    assert!(a == b, "two runs with the same seeds must give bit-identical weights");
    // Guard against a vacuous pass: a different seed changes the result.
    let mut other = SmallCnn::<16>::new(&Device::cpu(), 6).unwrap();
    other.fit(&data, Fit::epochs(1).batch_size(32).verbose(Verbosity::Quiet)).unwrap();
    assert_ne!(common::weights(&other)[0].1.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), a[0].1);
}
