//! The rumus benchmark suite: times the workloads that decide training speed on the chosen
//! device and prints a table (and JSON with `--json PATH`). Its PyTorch/numpy twin is
//! `tools/bench/torch_bench.py`; run both in the same session and compare ratios (docs/BENCHMARKS.md).
//!
//! ```text
//! cargo run --release -p rumus-tools --bin bench -- [--device cpu|wgpu] [--only matmul,linear,softmax,attention,conv,step,bn,memory,epoch,resnet] [--resnet-batch N] [--profile] [--tensor-cores] [--loss-scaling] [--json out.json]
//! ```
//!
//! `resnet` (ResNet-18 training steps, batch 128 unless `--resnet-batch` says otherwise) runs only
//! when `--only` names it. `--profile` (wgpu) then also times one step's every dispatch on the GPU
//! and prints the time per kernel (the twin: `torch_bench.py --only resnet --profile`), and
//! likewise one run of the matmul and softmax workloads: their GPU time beside their wall time.
//! `--tensor-cores` (wgpu, adapters with cooperative matrices) runs every workload with
//! `MatmulPrecision::F16TensorCores`, the mixed-precision mode, and names its rows so; the twin's
//! rows to set beside it are PyTorch's TF32 and bf16 autocast. `--loss-scaling` runs the ResNet-18
//! step with a `LossScaler` (unscaling and the finite check of every step included).
//!
//! The LeNet epoch benchmark reports its first epoch apart: run alone (`--only epoch`) in a
//! fresh process, that is the cold start, kernels compiled on the spot.

use std::time::Instant;

use rumus::nn::{BatchNorm2d, Conv2d, Conv2dConfig, Flatten, Linear, MaxPool2d, Module, Param, Relu, Sequential};
use rumus::optim::{Adam, LossScaler, Optimizer, Sgd};
use rumus::{no_grad, Device, MatmulPrecision, RawTensor, Result, RunningStats};
use rumus_test_models::ResNet18;

/// One measured workload.
struct Record {
    name: String,
    median_s: f64,
    /// Throughput in the record's unit (GFLOP/s or GB/s).
    rate: f64,
    unit: &'static str,
}

/// Median wall time of `f` over `repeats` runs after `warmup` runs. `f` must end with a sync
/// (a host read) so GPU work is included.
fn time(warmup: usize, repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[times.len() / 2])
}

/// Forces pending device work to finish by reading one element back.
fn sync(t: &RawTensor) -> Result<()> {
    t.narrow(0, 0, 1)?.reshape(&[t.numel() / t.shape()[0]])?.narrow(0, 0, 1)?.to_vec().map(|_| ())
}

/// With `--profile` on wgpu: the GPU time of one run of `work`'s kernels, to set beside its wall
/// time (what a workload spends outside its kernels is the difference).
fn profile_workload(device: &Device, profile: bool, what: &str, work: impl FnOnce() -> Result<()>) -> Result<()> {
    if let (true, Device::Wgpu(backend)) = (profile, device) {
        print_kernel_profile(what, &backend.profile_kernels(work)?);
    }
    Ok(())
}

/// `n`³ products, each up to a read-back of one element; on a GPU also up to
/// `Device::synchronize` (`... synchronize`), the wait without a read-back that PyTorch's twin
/// does with `torch.cuda.synchronize()`.
fn bench_matmul(device: &Device, n: usize, profile: bool) -> Result<Vec<Record>> {
    let a = RawTensor::randn(&[n, n], 0.0, 1.0, 1, device)?;
    let b = RawTensor::randn(&[n, n], 0.0, 1.0, 2, device)?;
    let repeats = if n >= 2048 { 5 } else { 20 };
    let product = || no_grad(|| sync(&a.matmul(&b)?));
    let record = |name: String, secs: f64| Record {
        name,
        median_s: secs,
        rate: 2.0 * (n as f64).powi(3) / secs / 1e9,
        unit: "GFLOP/s",
    };
    let mut records = vec![record(format!("matmul {n}x{n}x{n}"), time(2, repeats, product)?)];
    profile_workload(device, profile, &format!("matmul {n}³"), product)?;
    if !device.is_cpu() {
        let waited = || no_grad(|| a.matmul(&b).map(drop)).and_then(|()| device.synchronize());
        records.push(record(format!("matmul {n}x{n}x{n} synchronize"), time(2, repeats, waited)?));
    }
    Ok(records)
}

/// A named product to time.
type Product<'a> = (&'static str, Box<dyn Fn() -> Result<RawTensor> + 'a>);

/// The three products of a linear layer `x [m, k] → [m, n]` as autograd runs them: forward
/// `x @ wᵀ`, input gradient `g @ w`, weight gradient `gᵀ @ x` (a long `k = m`).
fn bench_linear_products(device: &Device, m: usize, k: usize, n: usize) -> Result<Vec<Record>> {
    let x = RawTensor::randn(&[m, k], 0.0, 1.0, 1, device)?;
    let w = RawTensor::randn(&[n, k], 0.0, 1.0, 2, device)?;
    let g = RawTensor::randn(&[m, n], 0.0, 1.0, 3, device)?;
    let flops = 2.0 * (m * k * n) as f64;
    let products: [Product; 3] = [
        ("fwd x@wT", Box::new(|| x.matmul(&w.transpose(0, 1)?))),
        ("dx g@w", Box::new(|| g.matmul(&w))),
        ("dw gT@x", Box::new(|| g.transpose(0, 1)?.matmul(&x))),
    ];
    products
        .iter()
        .map(|(what, f)| {
            let secs = time(3, 20, || no_grad(|| sync(&f()?)))?;
            Ok(Record {
                name: format!("linear {m}x{k}->{n} {what}"),
                median_s: secs,
                rate: flops / secs / 1e9,
                unit: "GFLOP/s",
            })
        })
        .collect()
}

fn bench_softmax(device: &Device, rows: usize, cols: usize, profile: bool) -> Result<Record> {
    let x = RawTensor::randn(&[rows, cols], 0.0, 1.0, 3, device)?.requires_grad_()?;
    let g = RawTensor::randn(&[rows, cols], 0.0, 1.0, 4, device)?;
    let pass = || {
        let y = x.softmax(-1)?;
        let grads = y.mul(&g)?.sum_all()?.backward()?;
        grads.get(&x).map(sync).unwrap_or(Ok(()))
    };
    let secs = time(2, 10, pass)?;
    profile_workload(device, profile, &format!("softmax fwd+bwd [{rows}, {cols}]"), pass)?;
    // Forward reads x and writes y; backward reads y and g and writes dx (the mul/sum that seed
    // the backward are extra traffic, counted too: they read y, g and write the product).
    let bytes = (rows * cols * 4) as f64 * 8.0;
    Ok(Record {
        name: format!("softmax fwd+bwd [{rows}, {cols}]"),
        median_s: secs,
        rate: bytes / secs / 1e9,
        unit: "GB/s",
    })
}

/// Causal attention over `[batch, heads, t, d]` (a GPT's), forward alone and forward plus
/// backward. FLOPs count the visible half of the scores: forward `2·2·B·H·T²·D / 2` (two
/// products), backward 2.5 times that (FlashAttention's convention).
fn bench_attention(device: &Device, (b, h, t, d): (usize, usize, usize, usize)) -> Result<Vec<Record>> {
    let shape = [b, h, t, d];
    let x = |seed| RawTensor::randn(&shape, 0.0, 1.0, seed, device)?.requires_grad_();
    let (q, k, v) = (x(11)?, x(12)?, x(13)?);
    let g = RawTensor::randn(&shape, 0.0, 1.0, 14, device)?;
    let forward_flops = 2.0 * 2.0 * (b * h * t * t * d) as f64 / 2.0;
    let forward = time(2, 10, || no_grad(|| sync(&q.scaled_dot_product_attention(&k, &v, true)?)))?;
    let both = time(2, 10, || {
        let y = q.scaled_dot_product_attention(&k, &v, true)?;
        let grads = y.mul(&g)?.sum_all()?.backward()?;
        grads.get(&q).map(sync).unwrap_or(Ok(()))
    })?;
    let name = format!("attention causal [{b},{h},{t},{d}]");
    let (per, unit) = if device.is_cpu() { (1e9, "GFLOP/s") } else { (1e12, "TFLOP/s") };
    Ok(vec![
        Record { name: format!("{name} fwd"), median_s: forward, rate: forward_flops / forward / per, unit },
        Record { name: format!("{name} fwd+bwd"), median_s: both, rate: 3.5 * forward_flops / both / per, unit },
    ])
}

/// A convolution's forward and backward (weight, bias and input gradients) on [n, c, h, h] with
/// `out` filters of k×k, stride 1 and `pad` padding. The rate counts three forward products.
fn bench_conv(
    device: &Device,
    name: &str,
    (n, c, h, out, k, pad): (usize, usize, usize, usize, usize, usize),
) -> Result<Record> {
    let conv = Conv2d::new(device, Conv2dConfig { padding: (pad, pad), ..Conv2dConfig::new(c, out, (k, k)) }, 9)?;
    let x = RawTensor::randn(&[n, c, h, h], 0.0, 1.0, 10, device)?.requires_grad_()?;
    let secs = time(3, 10, || {
        let grads = conv.forward_raw(&x)?.sum_all()?.backward()?;
        grads.get(&x).map(sync).unwrap_or(Ok(()))
    })?;
    let oh = h + 2 * pad + 1 - k;
    let flops = 3.0 * 2.0 * (n * out * oh * oh * c * k * k) as f64;
    Ok(Record { name: format!("{name} fwd+bwd"), median_s: secs, rate: flops / secs / 1e9, unit: "GFLOP/s" })
}

/// The MLP of the PyTorch twin: 784-300-100-10 with relu.
fn mlp(device: &Device) -> Result<Sequential> {
    Ok(Sequential::new()
        .with(Flatten::new())
        .with(Linear::new(device, 784, 300, true, 11)?)
        .with(Relu)
        .with(Linear::new(device, 300, 100, true, 12)?)
        .with(Relu)
        .with(Linear::new(device, 100, 10, true, 13)?))
}

/// LeNet-5 as in examples/mnist.rs and tools/bench/torch_bench.py (61,706 parameters).
fn lenet(device: &Device) -> Result<Sequential> {
    let conv = |cin, cout, pad| Conv2dConfig { padding: (pad, pad), ..Conv2dConfig::new(cin, cout, (5, 5)) };
    let pool = || MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1));
    Ok(Sequential::new()
        .with(Conv2d::new(device, conv(1, 6, 2), 1)?)
        .with(Relu)
        .with(pool())
        .with(Conv2d::new(device, conv(6, 16, 0), 2)?)
        .with(Relu)
        .with(pool())
        .with(Flatten::new())
        .with(Linear::new(device, 400, 120, true, 3)?)
        .with(Relu)
        .with(Linear::new(device, 120, 84, true, 4)?)
        .with(Relu)
        .with(Linear::new(device, 84, 10, true, 5)?))
}

/// Which batch norm the small CNN of [`cnn`] has.
#[derive(Clone, Copy, PartialEq)]
enum Norm {
    None,
    /// `BatchNorm2d`: the fused kernels (CPU and wgpu).
    Fused,
    /// A `BatchNorm2d` whose forward is `batch_norm_reference`, the composed form every device
    /// ran before the fused kernels (the "before" of issue #32).
    Composed,
}

/// A training-mode `BatchNorm2d` through the composed ops.
struct ComposedBatchNorm(BatchNorm2d);

impl Module for ComposedBatchNorm {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let bn = &self.0;
        let running = RunningStats { mean: bn.running_mean().tensor(), var: bn.running_var().tensor(), momentum: 0.1 };
        x.batch_norm_reference(Some(bn.weight().tensor()), Some(bn.bias().tensor()), Some(running), true, 1e-5)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.0.visit_params(prefix, visitor)
    }
    fn describe(&self) -> String {
        format!("composed {}", self.0.describe())
    }
}

/// The small CNN of issue #32 (as `cnn()` in tools/bench/torch_bench.py): two blocks of
/// conv 3×3 (padding 1), batch norm per `norm` (conv bias dropped then, as usual), ReLU and a
/// 2×2 max pool, 1→16→32 channels on 28×28, then a linear layer to 10 classes.
fn cnn(device: &Device, norm: Norm) -> Result<Sequential> {
    let with_norm = norm != Norm::None;
    let conv = |cin, cout| Conv2dConfig { padding: (1, 1), bias: !with_norm, ..Conv2dConfig::new(cin, cout, (3, 3)) };
    let pool = || MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1));
    let mut model = Sequential::new();
    for (i, (cin, cout)) in [(1, 16), (16, 32)].into_iter().enumerate() {
        model = model.with(Conv2d::new(device, conv(cin, cout), 20 + i as u64)?);
        let bn = || BatchNorm2d::new(device, cout, 1e-5, 0.1);
        model = match norm {
            Norm::None => model,
            Norm::Fused => model.with(bn()?),
            Norm::Composed => model.with(ComposedBatchNorm(bn()?)),
        };
        model = model.with(Relu).with(pool());
    }
    Ok(model.with(Flatten::new()).with(Linear::new(device, 32 * 7 * 7, 10, true, 22)?))
}

/// One training step (forward, cross-entropy, backward, Adam update) of `model` on MNIST-shaped
/// input at `batch`.
fn bench_step(device: &Device, name: &str, model: Sequential, batch: usize) -> Result<Record> {
    let params = rumus::nn::named_params(&model);
    let mut adam = Adam::new(1e-3);
    let x = RawTensor::randn(&[batch, 1, 28, 28], 0.0, 1.0, 6, device)?;
    let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
    let y = RawTensor::from_indices(&labels, &[batch], device)?;
    let secs = time(3, 30, || {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        let grads = loss.backward()?;
        adam.step(&params, &grads)?;
        loss.item().map(|_| ())
    })?;
    Ok(Record {
        name: format!("{name} train step b{batch}"),
        median_s: secs,
        rate: batch as f64 / secs,
        unit: "samples/s",
    })
}

/// One ResNet-18 training step (CIFAR form, `rumus_test_models::ResNet18`: forward in training
/// mode, cross-entropy, backward, SGD with momentum 0.9) on a synthetic `[batch, 3, 32, 32]` batch,
/// f32. The twin is `resnet_step_bench` in tools/bench/torch_bench.py.
fn bench_resnet_step(device: &Device, batch: usize, profile: bool, mut scaler: Option<LossScaler>) -> Result<Record> {
    let model = ResNet18::new(device, 1)?;
    let params = model.named_parameters();
    let mut sgd = Sgd::new(0.01).momentum(0.9);
    let x = RawTensor::randn(&[batch, 3, 32, 32], 0.0, 1.0, 6, device)?;
    let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
    let y = RawTensor::from_indices(&labels, &[batch], device)?;
    let repeats = if device.is_cpu() { 5 } else { 20 };
    let mut step = || {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        match scaler.as_mut() {
            Some(scaler) => {
                let mut grads = scaler.scale_loss(&loss)?.backward()?;
                scaler.step(&mut sgd, &params, &mut grads, None)?;
            }
            None => sgd.step(&params, &loss.backward()?)?,
        }
        loss.item().map(|_| ())
    };
    let secs = time(3, repeats, &mut step)?;
    if let (true, Device::Wgpu(backend)) = (profile, device) {
        print_kernel_profile(&format!("resnet18 train step b{batch}"), &backend.profile_kernels(step)?);
    }
    Ok(Record {
        name: format!("resnet18 train step b{batch}"),
        median_s: secs,
        rate: batch as f64 / secs,
        unit: "samples/s",
    })
}

/// Prints where a profiled run spent its GPU time: per kernel, per kernel and dispatch size (the
/// longest), and per shader file.
fn print_kernel_profile(what: &str, times: &[rumus::backend::wgpu::KernelTime]) {
    print!("{}", rumus::backend::wgpu::profile_table(what, times));
}

/// Peak device memory of one LeNet-5 training step at batch 64, counted from before the model
/// exists (parameters, Adam state, batch, activations, gradients), like the PyTorch twin's
/// `max_memory_allocated` difference. Only the wgpu pool counts bytes.
fn bench_lenet_memory(device: &Device) -> Result<Option<Record>> {
    let Device::Wgpu(backend) = device else { return Ok(None) };
    device.synchronize()?;
    let before = backend.pool_stats().live_bytes;
    backend.reset_peak_memory();
    let model = lenet(device)?;
    let params = rumus::nn::named_params(&model);
    let mut adam = Adam::new(1e-3);
    let x = RawTensor::randn(&[64, 1, 28, 28], 0.0, 1.0, 6, device)?;
    let labels: Vec<u32> = (0..64).map(|i| i % 10).collect();
    let y = RawTensor::from_indices(&labels, &[64], device)?;
    for _ in 0..3 {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        let grads = loss.backward()?;
        adam.step(&params, &grads)?;
    }
    device.synchronize()?;
    let peak = backend.pool_stats().peak_live_bytes.saturating_sub(before);
    Ok(Some(Record {
        name: "lenet step b64 peak memory".into(),
        median_s: 0.0,
        rate: peak as f64 / (1 << 20) as f64,
        unit: "MiB",
    }))
}

/// An MNIST-sized LeNet-5 epoch (60,000 samples resident on the device, shuffled, batches cut
/// on the device, Adam), reading the summed loss once at the end, like the PyTorch twin. Returns
/// the first (cold) epoch's time and the median of the `STEADY_EPOCHS` after it (single epochs
/// vary by up to 15% on the H200, too much for a first/steady ratio). Prints when the first and
/// the last steady epoch encoded a few of their steps, which shows where a cold start loses its
/// time.
fn bench_lenet_epoch(device: &Device, batch: usize) -> Result<[Record; 2]> {
    const SAMPLES: usize = 60_000;
    const STEADY_EPOCHS: usize = 3;
    let model = lenet(device)?;
    let params = rumus::nn::named_params(&model);
    let mut adam = Adam::new(1e-3);
    let images = RawTensor::randn(&[SAMPLES, 1, 28, 28], 0.0, 1.0, 7, device)?;
    let labels: Vec<u32> = (0..SAMPLES as u32).map(|i| rumus::rng::pcg_hash(i) % 10).collect();
    let mut rng = rumus::rng::Rng::new(8);
    // Milliseconds since the epoch began at these steps, printed for the first epoch and the
    // last steady one: where a cold start loses its time.
    const MARKS: [usize; 10] = [1, 2, 5, 10, 50, 100, 200, 400, 600, 900];
    let mut epoch = |label: &str| -> Result<f64> {
        let start = Instant::now();
        let mut order: Vec<u32> = (0..SAMPLES as u32).collect();
        rng.shuffle(&mut order);
        let mut total = RawTensor::zeros(&[], device)?;
        let mut marks_ms = Vec::new();
        for (step, chunk) in order.chunks(batch).enumerate() {
            if MARKS.contains(&step) {
                marks_ms.push(format!("{:.0}", start.elapsed().as_secs_f64() * 1e3));
            }
            // Images are cut on the device; the few label bytes are uploaded, as a loader would.
            let idx = RawTensor::from_indices(chunk, &[chunk.len()], device)?;
            let targets: Vec<u32> = chunk.iter().map(|&i| labels[i as usize]).collect();
            let (x, y) = (images.index_select(0, &idx)?, RawTensor::from_indices(&targets, &[chunk.len()], device)?);
            let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
            let grads = loss.backward()?;
            adam.step(&params, &grads)?;
            total = no_grad(|| total.add(&loss.detach()))?;
        }
        total.item()?;
        let secs = start.elapsed().as_secs_f64();
        if !label.is_empty() {
            let marks: Vec<String> = MARKS.iter().take(marks_ms.len()).map(usize::to_string).collect();
            println!(
                "{label} epoch b{batch}: steps {} encoded after {} ms, done after {:.0} ms",
                marks.join("/"),
                marks_ms.join("/"),
                secs * 1e3
            );
        }
        Ok(secs)
    };
    let first = epoch("first")?;
    let mut steady_left = STEADY_EPOCHS;
    let steady = time(0, STEADY_EPOCHS, || {
        steady_left -= 1;
        epoch(if steady_left == 0 { "last steady" } else { "" }).map(drop)
    })?;
    let record =
        |name: String, secs: f64| Record { name, median_s: secs, rate: SAMPLES as f64 / secs, unit: "samples/s" };
    Ok([
        record(format!("lenet mnist epoch b{batch} (first)"), first),
        record(format!("lenet mnist epoch b{batch}"), steady),
    ])
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let device = match value("--device").as_deref() {
        Some("cpu") | None => Device::cpu(),
        Some("wgpu") => Device::wgpu()?,
        Some(other) => {
            return Err(rumus::Error::InvalidArgument { op: "bench", detail: format!("unknown device {other}") })
        }
    };
    let tensor_cores = args.iter().any(|a| a == "--tensor-cores");
    let profile = args.iter().any(|a| a == "--profile");
    if tensor_cores {
        device.set_matmul_precision(MatmulPrecision::F16TensorCores)?;
    }
    let only = value("--only");
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.split(',').any(|w| w == name));
    // Steady-state timings wait for the start-up warm-up, whose stand-in kernels would be
    // timed otherwise. `--only epoch` alone, in a fresh process, is the cold start: its first
    // epoch compiles on the spot.
    if only.as_deref() != Some("epoch") {
        device.wait_for_kernels()?;
    }

    let mut records = Vec::new();
    if wanted("matmul") {
        let sizes: &[usize] = if device.is_cpu() { &[256, 512, 1024] } else { &[1024, 4096] };
        for &n in sizes {
            records.extend(bench_matmul(&device, n, profile)?);
        }
    }
    if wanted("linear") {
        // The Shakespeare GPT's linear layers at batch 64 × 256 tokens: attention in and out,
        // MLP up and down, the output head.
        for (k, n) in [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 84)] {
            records.extend(bench_linear_products(&device, 16384, k, n)?);
        }
    }
    if wanted("softmax") {
        records.push(bench_softmax(&device, 65536, 1024, profile)?);
    }
    if wanted("attention") {
        // The GPT of issue #29 (6 heads of 64, block 256) at batch 64; batch 8 on the CPU.
        let batch = if device.is_cpu() { 8 } else { 64 };
        records.extend(bench_attention(&device, (batch, 6, 256, 64))?);
    }
    if wanted("conv") {
        records.push(bench_conv(&device, "conv2d lenet1 [64,1,28,28]->6 k5", (64, 1, 28, 6, 5, 2))?);
        records.push(bench_conv(&device, "conv2d resblock [32,64,56,56]->64 k3", (32, 64, 56, 64, 3, 1))?);
    }
    if wanted("step") {
        for batch in [64, 256] {
            records.push(bench_step(&device, "lenet", lenet(&device)?, batch)?);
        }
        records.push(bench_step(&device, "mlp", mlp(&device)?, 64)?);
    }
    if wanted("bn") {
        // Issue #32: the cost of BatchNorm2d in a small CNN's training step.
        records.push(bench_step(&device, "cnn", cnn(&device, Norm::None)?, 64)?);
        records.push(bench_step(&device, "cnn+bn", cnn(&device, Norm::Fused)?, 64)?);
        records.push(bench_step(&device, "cnn+bn composed", cnn(&device, Norm::Composed)?, 64)?);
    }
    if wanted("memory") {
        records.extend(bench_lenet_memory(&device)?);
    }
    if wanted("epoch") {
        for batch in [64, 256] {
            records.extend(bench_lenet_epoch(&device, batch)?);
        }
    }
    // Minutes on a CPU: only when asked for by name.
    if only.as_ref().is_some_and(|o| o.split(',').any(|w| w == "resnet")) {
        let batch = value("--resnet-batch").and_then(|b| b.parse().ok()).unwrap_or(128);
        let scaler = args.iter().any(|a| a == "--loss-scaling").then(LossScaler::new);
        let name = if scaler.is_some() { " loss-scaled" } else { "" };
        let mut record = bench_resnet_step(&device, batch, profile, scaler)?;
        record.name.push_str(name);
        records.push(record);
    }

    if tensor_cores {
        for r in &mut records {
            r.name.push_str(" tc");
        }
    }
    println!("rumus on {} ({} threads)", device.name(), rayon::current_num_threads());
    println!("{:<36} {:>12} {:>14}", "workload", "median ms", "rate");
    for r in &records {
        println!("{:<36} {:>12.3} {:>10.1} {}", r.name, r.median_s * 1e3, r.rate, r.unit);
    }
    if let Some(path) = value("--json") {
        let rows: Vec<String> = records
            .iter()
            .map(|r| {
                format!(
                    "  {{\"name\": \"{}\", \"median_s\": {:.6}, \"rate\": {:.3}, \"unit\": \"{}\"}}",
                    r.name, r.median_s, r.rate, r.unit
                )
            })
            .collect();
        let json = format!(
            "{{\"framework\": \"rumus\", \"device\": \"{}\", \"results\": [\n{}\n]}}\n",
            device.name(),
            rows.join(",\n")
        );
        std::fs::write(&path, json).map_err(|e| rumus::Error::Io { path: path.into(), source: e })?;
    }
    Ok(())
}
