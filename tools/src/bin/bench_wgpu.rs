//! WGSL kernel benchmark: matmul at 1024³ and 4096³ (TFLOP/s; also on tensor cores with f16
//! inputs where the adapter has them), softmax forward + backward on [65536, 1024] (GB/s),
//! the ResNet-block convolution's three passes apart (forward, input gradient, weight gradient;
//! TFLOP/s), and training-mode batch norm at ResNet-18's four shapes (batch 128; GB/s): the fused
//! kernels alone, then forward and backward through the op, fused and composed, and with a ReLU
//! after it, fused into the batch norm's kernels or as its own op (issue #32), the
//! elementwise and reduction kernels of every training step (binary products and broadcasts,
//! relu and its backward, the add with a fused ReLU, sums; GB/s), timed with GPU timestamp queries where the adapter has TIMESTAMP_QUERY (else wall time between
//! full synchronisations). Warm-up runs first, then the median of repeats.
//!
//! ```text
//! cargo run --release -p rumus-tools --bin bench_wgpu -- results.json          # the real sizes
//! cargo run --release -p rumus-tools --bin bench_wgpu -- results.json --quick  # small sizes (lavapipe)
//! cargo run --release -p rumus-tools --bin bench_wgpu -- results.json --resnet18 # + ResNet-18's 3×3 convs,
//!                                        # implicit GEMM and Winograd (rows `... gemm`, `... winograd`),
//!                                        # and its stride-2 ones (shapes `...s2`)
//! cargo run --release -p rumus-tools --bin bench_wgpu -- results.json --only bn  # batch norm alone
//! cargo run --release -p rumus-tools --bin bench_wgpu -- results.json --only elementwise
//! ```
//!
//! The batch norm rows' PyTorch twin: `tools/bench/torch_bench.py --device cuda --only bnpass --gpu-time`;
//! the elementwise rows': `tools/bench/torch_bench.py --device cuda --only elementwise --gpu-time`.

use rumus::backend::wgpu::{ConvAlgorithm, WgpuBackend};
use std::sync::Arc;

use rumus::backend::{
    Backend, BatchNormArgs, BinaryOp, Conv2dArgs, Conv2dWanted, ConvGeom, MatmulArgs, MatrixLayout, ReduceDims,
    ReduceOp, Storage, UnaryOp,
};
use rumus::{Device, Layout, MatmulPrecision, RawTensor, Result, RunningStats};

struct Row {
    name: String,
    shape: String,
    median_ms: f64,
    rate: f64,
    unit: &'static str,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn random(b: &WgpuBackend, len: usize, seed: u64) -> Result<Storage> {
    b.random(rumus::backend::RandomKind::Normal, len, seed)
}

/// Median seconds of `repeats` timed runs of `work`, after `warmup` untimed ones.
fn time(b: &WgpuBackend, warmup: usize, repeats: usize, work: &dyn Fn() -> Result<()>) -> Result<f64> {
    for _ in 0..warmup {
        work()?;
    }
    b.synchronize()?;
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        samples.push(b.time_gpu(work)?);
    }
    Ok(median(samples))
}

fn bench_matmul(b: &WgpuBackend, size: usize, repeats: usize, precision: MatmulPrecision) -> Result<Row> {
    b.set_matmul_precision(precision)?;
    let lhs = random(b, size * size, 1)?;
    let rhs = random(b, size * size, 2)?;
    let args = MatmulArgs {
        batch: 1,
        m: size,
        k: size,
        n: size,
        lhs: MatrixLayout::row_major(size, size),
        rhs: MatrixLayout::row_major(size, size),
    };
    let secs = time(b, 2, repeats, &|| b.matmul(&lhs, &rhs, &args).map(drop))?;
    b.set_matmul_precision(MatmulPrecision::F32)?;
    let flops = 2.0 * (size as f64).powi(3);
    Ok(Row {
        name: format!("matmul {precision}"),
        shape: format!("{size}x{size}x{size}"),
        median_ms: secs * 1e3,
        rate: flops / secs / 1e12,
        unit: "TFLOP/s",
    })
}

fn bench_softmax(b: &WgpuBackend, rows: usize, cols: usize, repeats: usize) -> Result<Row> {
    let x = random(b, rows * cols, 3)?;
    let g = random(b, rows * cols, 4)?;
    let secs = time(b, 2, repeats, &|| {
        let y = b.softmax(&x, rows, cols, false)?;
        b.softmax_backward(&y, &g, rows, cols, false).map(drop)
    })?;
    // Minimal traffic: forward reads x and writes y; backward reads y and g and writes dx.
    let bytes = 5.0 * (rows * cols) as f64 * 4.0;
    Ok(Row {
        name: "softmax fwd+bwd".into(),
        shape: format!("{rows}x{cols}"),
        median_ms: secs * 1e3,
        rate: bytes / secs / 1e9,
        unit: "GB/s",
    })
}

/// Channels and side of each stage of ResNet-18 (CIFAR form): `--resnet18` times the stride-1
/// 3×3 convolutions at batch 128, as `torch_bench.py --only convpass --resnet18` does, and the
/// `bn` rows the batch norms.
const RESNET18_STAGES: [(usize, usize); 4] = [(64, 32), (128, 16), (256, 8), (512, 4)];

/// ResNet-18's downsampling convolutions at batch 128, as `(n, c, h, o, k, pad, stride)`: each
/// later stage's first 3×3 convolution and its 1×1 shortcut, both of stride 2 (on the implicit
/// GEMM: Winograd takes stride 1 only).
const RESNET18_DOWNSAMPLING: [(usize, usize, usize, usize, usize, usize, usize); 6] = [
    (128, 64, 32, 128, 3, 1, 2),
    (128, 128, 16, 256, 3, 1, 2),
    (128, 256, 8, 512, 3, 1, 2),
    (128, 64, 32, 128, 1, 0, 2),
    (128, 128, 16, 256, 1, 0, 2),
    (128, 256, 8, 512, 1, 0, 2),
];

/// The three passes of a convolution of `[n, c, h, h]` by `o` filters of k×k (padding `pad`,
/// `stride`, with bias), each timed on its own: the forward, the input gradient, and the weight
/// gradient with its bias gradient (one backward call, as autograd makes it). Each pass is one
/// product of `2·n·o·oh·ow·c·k·k` flops (Winograd's fewer multiplications count as the same
/// work, so its rate compares with the GEMM's and cuDNN's). `algorithm` (e.g. ` winograd`) is
/// appended to the rows' names. Without `bias` (as ResNet's convolutions), the forward has
/// none and the weight gradient no bias gradient.
fn bench_conv(
    b: &WgpuBackend,
    (n, c, h, o, k, pad, stride): (usize, usize, usize, usize, usize, usize, usize),
    repeats: usize,
    algorithm: &str,
    bias: bool,
) -> Result<Vec<Row>> {
    let geom = ConvGeom::square(n, c, (h, h), k, stride, pad, 1)
        .ok_or_else(|| rumus::Error::Gpu("bench_conv: the kernel does not fit the input".into()))?;
    let args = Conv2dArgs { geom, out_channels: o, groups: 1 };
    let x = random(b, n * c * h * h, 5)?;
    let w = random(b, o * c * k * k, 6)?;
    let bias = if bias { Some(random(b, o, 7)?) } else { None };
    let gy = random(b, n * o * geom.out_h * geom.out_w, 8)?;
    let stride_suffix = if stride == 1 { String::new() } else { format!("s{stride}") };
    let shape = format!("{n}x{c}x{h}x{h}->{o}k{k}{stride_suffix}");
    let flops = 2.0 * (n * o * geom.out_h * geom.out_w * c * k * k) as f64;
    let (x, w, gy) = (&x, &w, &gy);
    let forward = || -> Result<()> {
        b.conv2d(x, w, bias.as_ref(), &args)?
            .map(drop)
            .ok_or_else(|| rumus::Error::Gpu("the wgpu backend declined the convolution".into()))
    };
    let backward = |wanted: Conv2dWanted| move || b.conv2d_backward(x, w, gy, &args, wanted).map(drop);
    let input_grad = backward(Conv2dWanted { x: true, weight: false, bias: false });
    let weight_grad = backward(Conv2dWanted { x: false, weight: true, bias: bias.is_some() });
    let passes: [(&str, &dyn Fn() -> Result<()>); 3] =
        [("conv2d forward", &forward), ("conv2d input grad", &input_grad), ("conv2d weight grad", &weight_grad)];
    passes
        .into_iter()
        .map(|(name, pass)| {
            let secs = time(b, 2, repeats, pass)?;
            Ok(Row {
                name: format!("{name}{algorithm}"),
                shape: shape.clone(),
                median_ms: secs * 1e3,
                rate: flops / secs / 1e12,
                unit: "TFLOP/s",
            })
        })
        .collect()
}

/// Training-mode batch norm of `[n, c, h, h]` (weight and bias, running statistics): the
/// fused kernels alone (forward and backward, `Backend::batch_norm` and `batch_norm_backward`),
/// then forward and backward through the op as a layer runs it (`RawTensor::batch_norm`, the
/// running statistics' update included, and `batch_norm_reference`, the composed form the
/// wgpu backend ran before the fused kernels), the backward seeded with a gradient through
/// one multiply (the same for both); then the same with a ReLU after the batch norm: fused
/// into its kernels (`BatchNormArgs::relu`, `RawTensor::batch_norm_relu`, what `#[model]`
/// runs for `BatchNorm2d, Relu`) and as a separate ReLU op. Rates count the fused kernels'
/// traffic: the forward reads x twice and writes y, the backward reads x and dy twice and
/// writes dx (8 passes; a separate ReLU adds 5 more).
fn bench_batch_norm(b: &Arc<WgpuBackend>, (n, c, h): (usize, usize, usize), repeats: usize) -> Result<Vec<Row>> {
    let len = n * c * h * h;
    let args = BatchNormArgs { batch: n, channels: c, inner: h * h, eps: 1e-5, batch_stats: true, relu: false };
    let (x, g) = (random(b, len, 9)?, random(b, len, 10)?);
    let (w, bias) = (b.full(c, 1.0)?, b.full(c, 0.0)?);
    let kernels_of = |args: BatchNormArgs| {
        let (x, g, w, bias) = (&x, &g, &w, &bias);
        move || -> Result<()> {
            let (_, mean, var) = b.batch_norm(x, Some(w), Some(bias), None, &args)?;
            b.batch_norm_backward(x, Some(w), Some(bias), &mean, &var, g, &args).map(drop)
        }
    };
    let (kernels, kernels_relu) = (kernels_of(args), kernels_of(BatchNormArgs { relu: true, ..args }));
    let device = Device::Wgpu(b.clone());
    let shape = [n, c, h, h];
    let xt = RawTensor::randn(&shape, 0.0, 1.0, 11, &device)?.requires_grad_()?;
    let gt = RawTensor::randn(&shape, 0.0, 1.0, 12, &device)?;
    let wt = RawTensor::ones(&[c], &device)?.requires_grad_()?;
    let bt = RawTensor::zeros(&[c], &device)?.requires_grad_()?;
    let (rm, rv) = (RawTensor::zeros(&[c], &device)?, RawTensor::ones(&[c], &device)?);
    #[derive(Clone, Copy)]
    enum Form {
        Fused,
        Composed,
        FusedRelu,
        ThenRelu,
    }
    let op = |form: Form| {
        let (xt, gt, wt, bt, rm, rv) = (&xt, &gt, &wt, &bt, &rm, &rv);
        move || -> Result<()> {
            let running = Some(RunningStats { mean: rm, var: rv, momentum: 0.1 });
            let (w, bias) = (Some(wt), Some(bt));
            let y = match form {
                Form::Fused => xt.batch_norm(w, bias, running, true, 1e-5)?,
                Form::Composed => xt.batch_norm_reference(w, bias, running, true, 1e-5)?,
                Form::FusedRelu => xt.batch_norm_relu(w, bias, running, true, 1e-5)?,
                Form::ThenRelu => xt.batch_norm(w, bias, running, true, 1e-5)?.relu()?,
            };
            y.mul(gt)?.sum_all()?.backward().map(drop)
        }
    };
    let (fused, composed) = (op(Form::Fused), op(Form::Composed));
    let (fused_relu, then_relu) = (op(Form::FusedRelu), op(Form::ThenRelu));
    let passes: [(&str, &dyn Fn() -> Result<()>); 6] = [
        ("batch_norm kernels fwd+bwd", &kernels),
        ("batch_norm op fwd+bwd", &fused),
        ("batch_norm composed fwd+bwd", &composed),
        ("batch_norm_relu kernels fwd+bwd", &kernels_relu),
        ("batch_norm_relu op fwd+bwd", &fused_relu),
        ("batch_norm then relu op fwd+bwd", &then_relu),
    ];
    let bytes = 8.0 * len as f64 * 4.0;
    passes
        .into_iter()
        .map(|(name, pass)| {
            let secs = time(b, 2, repeats, pass)?;
            Ok(Row {
                name: name.into(),
                shape: format!("{n}x{c}x{h}x{h}"),
                median_ms: secs * 1e3,
                rate: bytes / secs / 1e9,
                unit: "GB/s",
            })
        })
        .collect()
}

/// One timed kernel: its name, the shape shown, the elements its minimal traffic moves, the work.
type Case<'a> = (&'static str, &'a String, usize, &'a dyn Fn() -> Result<()>);

/// The elementwise and reduction kernels of every training step (issue #32), each timed alone
/// through the `Backend` method an op calls: a product of two contiguous `[rows, cols]`
/// tensors, a product with a broadcast scalar (stride 0; a product's backward under `sum_all`),
/// a per-channel bias `[c, 1, 1]` added to `[n, c, h, h]`, relu and its backward, the add with
/// the ReLU fused (`add_relu`, a residual block's end; its backward is relu's backward given the
/// output), `sum_all`, a sum over the last axis of `[rows, cols]` and over the first of a GPT's
/// `[16384, 384]` and `[16384, 1536]` (its bias gradients: columns down a tall matrix). Rates
/// count the minimal traffic: each input read once, the output written once (relu's backward: x
/// and the gradient in, one out).
fn bench_elementwise(
    b: &WgpuBackend,
    (rows, cols): (usize, usize),
    (n, c, h): (usize, usize, usize),
    repeats: usize,
) -> Result<Vec<Row>> {
    let len = rows * cols;
    let matrix = Layout::contiguous(&[rows, cols]);
    let (x, g) = (random(b, len, 13)?, random(b, len, 14)?);
    let scalar = random(b, 1, 15)?;
    let scalar_view = Layout::contiguous(&[1]).broadcast_to(&[rows, cols])?;
    let image = n * c * h * h;
    let (act, bias) = (random(b, image, 16)?, random(b, c, 17)?);
    let image_layout = Layout::contiguous(&[n, c, h, h]);
    let bias_view = Layout::contiguous(&[c, 1, 1]).broadcast_to(&[n, c, h, h])?;
    let relu_y = b.unary(UnaryOp::Relu, &x, len)?;
    let shape = format!("{rows}x{cols}");
    let image_shape = format!("{n}x{c}x{h}x{h}+{c}x1x1");
    let flat = format!("{len}");
    let mul = || b.binary(BinaryOp::Mul, &x, &matrix, &g, &matrix).map(drop);
    let mul_scalar = || b.binary(BinaryOp::Mul, &scalar, &scalar_view, &g, &matrix).map(drop);
    let add_channel = || b.binary(BinaryOp::Add, &act, &image_layout, &bias, &bias_view).map(drop);
    let relu = || b.unary(UnaryOp::Relu, &x, len).map(drop);
    let relu_backward = || b.unary_backward(UnaryOp::Relu, &x, &relu_y, &g, len).map(drop);
    let add_relu = || b.binary(BinaryOp::AddRelu, &x, &matrix, &g, &matrix).map(drop);
    let sum_all = || b.reduce(ReduceOp::Sum, &x, ReduceDims { outer: 1, len, inner: 1 }).map(drop);
    let sum_rows = || b.reduce(ReduceOp::Sum, &x, ReduceDims { outer: rows, len: cols, inner: 1 }).map(drop);
    let tall = random(b, 16384 * 1536, 18)?;
    let sum_cols = |cols: usize| b.reduce(ReduceOp::Sum, &tall, ReduceDims { outer: 1, len: 16384, inner: cols });
    let sum_cols_384 = || sum_cols(384).map(drop);
    let sum_cols_1536 = || sum_cols(1536).map(drop);
    let (narrow, wide) = ("16384x384".to_string(), "16384x1536".to_string());
    let cases: [Case; 10] = [
        ("mul contiguous", &shape, 3 * len, &mul),
        ("mul broadcast scalar", &shape, 2 * len, &mul_scalar),
        ("add per-channel", &image_shape, 2 * image, &add_channel),
        ("relu", &flat, 2 * len, &relu),
        ("relu backward", &flat, 3 * len, &relu_backward),
        ("add_relu", &flat, 3 * len, &add_relu),
        ("sum_all", &flat, len, &sum_all),
        ("sum last axis", &shape, len + rows, &sum_rows),
        ("sum first axis", &narrow, 16384 * 384 + 384, &sum_cols_384),
        ("sum first axis", &wide, 16384 * 1536 + 1536, &sum_cols_1536),
    ];
    cases
        .into_iter()
        .map(|(name, shape, elements, work)| {
            let secs = time(b, 2, repeats, work)?;
            Ok(Row {
                name: name.into(),
                shape: shape.clone(),
                median_ms: secs * 1e3,
                rate: elements as f64 * 4.0 / secs / 1e9,
                unit: "GB/s",
            })
        })
        .collect()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // The output path: the first argument that is neither an option nor `--only`'s value.
    let out_path = args
        .iter()
        .enumerate()
        .find(|&(i, a)| !a.starts_with("--") && (i == 0 || args[i - 1] != "--only"))
        .map(|(_, a)| a.clone())
        .unwrap_or_else(|| "bench_wgpu.json".into());
    let device = Device::wgpu()?;
    // Timed kernels, not the start-up warm-up's stand-ins.
    device.wait_for_kernels()?;
    let Device::Wgpu(b) = device else {
        return Err(rumus::Error::Gpu("Device::wgpu returned another device".into()));
    };
    let ctx = b.context();
    println!(
        "adapter: {}  subgroups: {}  timestamps: {}",
        ctx.adapter_name(),
        ctx.has_subgroups(),
        ctx.has_timestamps()
    );
    let (sizes, (rows, cols), repeats) =
        if quick { (vec![128, 256], (4096, 1024), 3) } else { (vec![1024, 4096], (65536, 1024), 10) };
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.split(',').any(|w| w == name));
    let mut rows_out = Vec::new();
    let mut precisions = vec![MatmulPrecision::F32];
    if ctx.has_tensor_cores() {
        precisions.push(MatmulPrecision::F16TensorCores);
    }
    if wanted("matmul") {
        for precision in precisions {
            for &size in &sizes {
                rows_out.push(bench_matmul(&b, size, repeats, precision)?);
            }
        }
    }
    if wanted("softmax") {
        rows_out.push(bench_softmax(&b, rows, cols, repeats)?);
    }
    if wanted("elementwise") {
        let batch = if quick { 8 } else { 128 };
        rows_out.extend(bench_elementwise(&b, (rows, cols), (batch, 64, 32), repeats)?);
    }
    if wanted("conv") {
        let resblock = if quick { (4, 16, 14, 16, 3, 1, 1) } else { (32, 64, 56, 64, 3, 1, 1) };
        rows_out.extend(bench_conv(&b, resblock, repeats, "", true)?);
    }
    if wanted("bn") {
        // ResNet-18 (CIFAR form) at batch 128: after the stem and each stage's downsampling.
        let batch = if quick { 8 } else { 128 };
        for (c, h) in RESNET18_STAGES {
            rows_out.extend(bench_batch_norm(&b, (batch, c, h), repeats)?);
        }
    }
    if wanted("conv") && args.iter().any(|a| a == "--resnet18") {
        // The 3×3 convolutions of ResNet-18's four stages (CIFAR form, batch 128), which make
        // up most of its training step, on each algorithm (backends of their own, whatever
        // RUMUS_WGPU_CONV says): rows `conv2d forward gemm` next to `conv2d forward winograd`.
        let batch = if quick { 8 } else { 128 };
        // F(2×2, 3×3) (`winograd`) and F(4×4, 3×3) (`winograd4`); where the adapter has tensor
        // cores, Winograd's products on them too (`winograd tc`, `winograd4 tc`), as
        // `MatmulPrecision::F16TensorCores` runs them (from 128 channels).
        // The implicit GEMM on tensor cores (`gemm tc`: `conv2d_coop.wgsl` for the forward and
        // the weight gradient) too.
        let mut backends = Vec::new();
        for (algorithm, name) in [
            (ConvAlgorithm::ImplicitGemm, " gemm"),
            (ConvAlgorithm::Winograd, " winograd"),
            (ConvAlgorithm::Winograd4x4, " winograd4"),
        ] {
            backends.push((WgpuBackend::with_conv_algorithm(algorithm)?, name));
            if ctx.has_tensor_cores() {
                let b = WgpuBackend::with_conv_algorithm(algorithm)?;
                b.set_matmul_precision(MatmulPrecision::F16TensorCores)?;
                let tc = match algorithm {
                    ConvAlgorithm::ImplicitGemm => " gemm tc",
                    ConvAlgorithm::Winograd => " winograd tc",
                    _ => " winograd4 tc",
                };
                backends.push((b, tc));
            }
        }
        for (c, h) in RESNET18_STAGES {
            for (backend, algorithm) in &backends {
                rows_out.extend(bench_conv(backend, (batch, c, h, c, 3, 1, 1), repeats, algorithm, true)?);
            }
        }
        // The stride-2 ones on the implicit GEMM, and where the adapter has tensor cores on
        // theirs (`conv2d_coop.wgsl`, rows ` tc`, without bias as in ResNet: a forward with a
        // bias is not split).
        let tensor_cores = if ctx.has_tensor_cores() {
            let tc = WgpuBackend::with_conv_algorithm(ConvAlgorithm::Auto)?;
            tc.set_matmul_precision(MatmulPrecision::F16TensorCores)?;
            Some(tc)
        } else {
            None
        };
        for (n, c, h, o, k, pad, stride) in RESNET18_DOWNSAMPLING {
            let n = if quick { 8 } else { n };
            rows_out.extend(bench_conv(&b, (n, c, h, o, k, pad, stride), repeats, "", true)?);
            if let Some(tc) = &tensor_cores {
                rows_out.extend(bench_conv(tc, (n, c, h, o, k, pad, stride), repeats, " tc", false)?);
            }
        }
    }

    println!("{:<32} {:>16} {:>12} {:>14}", "kernel", "shape", "median ms", "rate");
    for r in &rows_out {
        println!("{:<32} {:>16} {:>12.3} {:>9.2} {}", r.name, r.shape, r.median_ms, r.rate, r.unit);
    }
    let entries: Vec<String> = rows_out
        .iter()
        .map(|r| {
            format!(
                "    {{\"kernel\": \"{}\", \"shape\": \"{}\", \"median_ms\": {:.4}, \"rate\": {:.4}, \"unit\": \"{}\"}}",
                r.name, r.shape, r.median_ms, r.rate, r.unit
            )
        })
        .collect();
    let json = format!(
        "{{\n  \"adapter\": \"{}\",\n  \"subgroups\": {},\n  \"timestamps\": {},\n  \"results\": [\n{}\n  ]\n}}\n",
        ctx.adapter_name().replace('"', "'"),
        ctx.has_subgroups(),
        ctx.has_timestamps(),
        entries.join(",\n")
    );
    std::fs::write(&out_path, json).map_err(|e| rumus::Error::Gpu(format!("writing {out_path}: {e}")))?;
    println!("wrote {out_path}");
    Ok(())
}
