//! Numerics at the edges on both devices, and the wgpu backend's limits and faults: tensors past
//! the largest storage binding, more than 65,535 workgroups in every kernel family, an adapter
//! that reports f16, no adapter at all, NaN losses and threads.
//!
//! (tests/ops/wgpu_parity.rs compares every op at ordinary sizes and covers > 65,535 rows for the
//! grid-stride kernels; the dispatches here exceed 65,535 workgroups of 256 invocations, which
//! the 1-D kernels split over two dispatch dimensions.)

use crate::common;

use common::{in_child, regression_data, rss_bytes, run_child, test_path, weights};
use rumus::backend::cpu::CpuBackend;
use rumus::backend::*;
use rumus::nn::{join_name, Linear, Module, Param};
use rumus::prelude::*;
use rumus::testing::wgpu_or_skip;
use rumus::Layout;

// ----- numerics on both devices -----

/// Rows of `cols` logits: extreme ±1e4, all equal (high and low), and -inf everywhere but one
/// place (which holds an extreme value itself).
fn extreme_rows(cols: usize) -> Vec<f32> {
    let mut x = Vec::new();
    let mut row = vec![0.0; cols];
    row[0] = 1e4;
    row[1] = -1e4;
    x.extend(&row);
    x.extend(vec![1e4; cols]);
    x.extend(vec![-1e4; cols]);
    let mut masked = vec![f32::NEG_INFINITY; cols];
    masked[1] = -1e4;
    x.extend(&masked);
    let mut masked = vec![f32::NEG_INFINITY; cols];
    masked[cols - 1] = 1e4;
    x.extend(&masked);
    x
}

fn check_extremes(device: &Device) {
    // 3 columns take the one-invocation-per-row kernels, 40 the workgroup-per-row ones.
    for cols in [3usize, 40] {
        let at = |row: usize, col: usize| row * cols + col;
        let what = format!("{} cols {cols}", device.name());
        let x = RawTensor::from_vec(extreme_rows(cols), &[5, cols], device).unwrap();
        let p = x.softmax(-1).unwrap().to_vec().unwrap();
        let uniform = 1.0 / cols as f32;
        assert_eq!((p[at(0, 0)], p[at(0, 1)]), (1.0, 0.0), "{what}: {p:?}");
        for row in [1, 2] {
            assert!(
                p[at(row, 0)..at(row + 1, 0)].iter().all(|v| (v - uniform).abs() < 1e-6),
                "{what} row {row}: {p:?}"
            );
        }
        assert_eq!(p[at(3, 1)], 1.0, "{what}");
        assert_eq!(p[at(4, cols - 1)], 1.0, "{what}");
        assert!(p.iter().all(|v| v.is_finite() && *v >= 0.0), "{what}: {p:?}");
        assert_eq!(p[at(3, 0)], 0.0, "{what}");

        let lp = x.log_softmax(-1).unwrap().to_vec().unwrap();
        assert_eq!((lp[at(0, 0)], lp[at(0, 1)]), (0.0, -2e4), "{what}");
        let ln_c = -(cols as f32).ln();
        for row in [1, 2] {
            assert!(lp[at(row, 0)..at(row + 1, 0)].iter().all(|v| (v - ln_c).abs() < 1e-5), "{what}: {lp:?}");
        }
        assert_eq!((lp[at(3, 1)], lp[at(4, cols - 1)]), (0.0, 0.0), "{what}");
        assert_eq!(lp[at(3, 0)], f32::NEG_INFINITY, "{what}: masked entries are -inf, not NaN");
        assert!(!lp.iter().any(|v| v.is_nan()), "{what}: {lp:?}");

        // Cross-entropy: 0, ln c, ln c, 0, 0 per row; gradients finite everywhere.
        let targets = RawTensor::from_indices(&[0, 1, 2, 1, cols as u32 - 1], &[5], device).unwrap();
        let logits = x.requires_grad_().unwrap();
        let loss = logits.cross_entropy(&targets, 0.0).unwrap();
        let expected = 2.0 * (cols as f32).ln() / 5.0;
        assert!((loss.item().unwrap() - expected).abs() < 1e-5, "{what}: loss {}", loss.item().unwrap());
        let grads = loss.backward().unwrap();
        let g = grads.get(&logits).unwrap().to_vec().unwrap();
        assert!(g.iter().all(|v| v.is_finite()), "{what}: {g:?}");
        assert_eq!(g[at(3, 0)], 0.0, "{what}: no gradient flows to a masked logit");
        // With label smoothing a masked logit gets an infinite loss, reported as such (not NaN).
        let smoothed = x.cross_entropy(&targets, 0.1).unwrap().item().unwrap();
        assert!(smoothed.is_infinite() || smoothed.is_finite(), "{what}: smoothed loss {smoothed}");
        // log_softmax's own gradient at ±1e4 (rows without -inf).
        let finite = x.narrow(0, 0, 3).unwrap().requires_grad_().unwrap();
        let grads = finite.log_softmax(-1).unwrap().sum_all().unwrap().backward().unwrap();
        assert!(grads.get(&finite).unwrap().to_vec().unwrap().iter().all(|v| v.is_finite()), "{what}");
    }
}

#[test]
fn softmax_log_softmax_and_cross_entropy_at_extreme_logits_on_the_cpu() {
    check_extremes(&Device::cpu());
}

#[test]
fn softmax_log_softmax_and_cross_entropy_at_extreme_logits_on_wgpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    check_extremes(&gpu);
}

/// `[4] → [1]` on any device.
struct Reg {
    fc: Linear,
}

impl Module for Reg {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "Reg".into()
    }
}

impl Model for Reg {
    type Input = Shape1<4>;
    type Output = Shape1<1>;
}

#[test]
fn a_nan_loss_on_wgpu_ends_fit_with_an_error_and_the_last_good_weights() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let data = regression_data(64, 3)?;
    let mut model = Reg { fc: Linear::new(&gpu, 4, 1, true, 4)? };
    model.fit(&data, Fit::epochs(1).batch_size(16).optimizer(Sgd::new(0.01)).verbose(Verbosity::Quiet))?;
    let good = weights(&model);
    let diverge = || Fit::epochs(3).batch_size(16).optimizer(Sgd::new(1e30)).verbose(Verbosity::Quiet);
    let err = model.fit(&data, diverge().callback(TerminateOnNaN::new())).unwrap_err();
    assert!(matches!(err, Error::Training(_)), "{err}");
    assert_eq!(weights(&model), good, "weights of the start of the failing epoch");
    // Without the callback: still an error, naming the non-finite loss.
    let err = model.fit(&data, diverge()).unwrap_err();
    assert!(matches!(err, Error::NonFinite(_)), "{err}");
    Ok(())
}

// ----- limits -----

/// Runs alone in a child process, so the process's RSS moves only with what this test does (on
/// the H200 the parallel tests' buffers once grew it by 290 MB during the check).
#[test]
fn tensors_past_the_largest_storage_binding_are_gpu_errors_without_host_allocation() {
    if !in_child() {
        let name = "tensors_past_the_largest_storage_binding_are_gpu_errors_without_host_allocation";
        run_child(&test_path(module_path!(), name), &[]);
        return;
    }
    let Some(gpu) = wgpu_or_skip() else { return };
    let Device::Wgpu(backend) = &gpu else { unreachable!() };
    let limit = backend.context().limits().max_storage_buffer_binding_size;
    // 40M f32 = 160 MB: past lavapipe's 128 MiB; on bigger adapters scale past their limit. A
    // multiple of 2,000 so the [n/1000, 1000] and [2, n/2] shapes below hold all n elements.
    let n = (40_000_000u64).max((limit / 4 / 2000 + 1) * 2000) as usize;
    let rss = rss_bytes();
    let gpu_error = |what: &str, r: Result<RawTensor>| match r {
        Err(Error::Gpu(msg)) => {
            assert!(msg.contains("exceeds") && msg.contains("largest storage binding"), "{what}: {msg}")
        }
        other => panic!("{what}: expected Error::Gpu, got {:?}", other.map(|t| t.shape().to_vec())),
    };
    gpu_error("zeros", RawTensor::zeros(&[n], &gpu));
    gpu_error("full", RawTensor::full(3.0, &[n / 1000, 1000], &gpu));
    gpu_error("ones", RawTensor::ones(&[2, n / 2], &gpu));
    gpu_error("rand_uniform", RawTensor::rand_uniform(&[n], 0.0, 1.0, 1, &gpu));
    gpu_error("randn", RawTensor::randn(&[n], 0.0, 1.0, 1, &gpu));
    // An op whose output is too big, from inputs that fit.
    let a = RawTensor::zeros(&[1, n / 4], &gpu).unwrap();
    let b = RawTensor::zeros(&[5, 1], &gpu).unwrap();
    gpu_error("broadcast add", a.add(&b));
    let col = RawTensor::zeros(&[n / 5000 + 1, 1], &gpu).unwrap();
    let row = RawTensor::zeros(&[1, 5000], &gpu).unwrap();
    gpu_error("matmul", col.matmul(&row));
    // A convolution of one pixel, padded to an output of at least n elements. (Where the
    // binding holds 2^30 elements, the kernels' 32-bit index check refuses it first.)
    let pixel = RawTensor::ones(&[1, 1, 1, 1], &gpu).unwrap();
    let pad = (n as f64).sqrt().ceil() as usize / 2;
    match pixel.conv2d(&pixel, None, (1, 1), (pad, pad), (1, 1), 1) {
        Err(Error::Gpu(msg)) => assert!(msg.contains("exceeds"), "conv2d: {msg}"),
        other => panic!("conv2d: expected Error::Gpu, got {:?}", other.map(|t| t.shape().to_vec())),
    }
    drop((a, b, col, row, pixel));
    if let (Some(before), Some(after)) = (rss, rss_bytes()) {
        // The refused tensors were never allocated on the host (lavapipe's device memory is
        // host memory: the 40 MB input above counts).
        assert!(after < before + 100_000_000, "RSS grew from {before} to {after}");
    }
    // The device still works afterwards.
    let x = RawTensor::from_vec(vec![1.0, 2.0, 3.0], &[3], &gpu).unwrap();
    assert_eq!(x.mul_scalar(2.0).unwrap().to_vec().unwrap(), [2.0, 4.0, 6.0]);
}

// ----- more than 65,535 workgroups of 256 in every 1-D kernel family -----

/// Invocations past 65,535 workgroups of 256 (a second row of workgroups in y), at 67 MB per
/// f32 buffer: under lavapipe's 128 MiB binding limit.
const N: usize = 65_535 * 256 + 4_097;

fn gpu_backend() -> Option<std::sync::Arc<rumus::backend::wgpu::WgpuBackend>> {
    match wgpu_or_skip()? {
        Device::Wgpu(b) => Some(b),
        Device::Cpu => None,
    }
}

fn read_f32(b: &dyn Backend, s: &Storage) -> Vec<f32> {
    b.to_f32(s, &Layout::contiguous(&[s.len()])).unwrap()
}

fn read_u32(b: &dyn Backend, s: &Storage) -> Vec<u32> {
    b.to_u32(s, &Layout::contiguous(&[s.len()])).unwrap()
}

/// Runs `f` on the CPU and the wgpu backend and compares every output; returns nothing when
/// there is no adapter. Inputs from the random kernel agree bit for bit on lavapipe and to
/// within a few ulps on GPUs with approximate transcendentals.
fn big_parity(name: &str, tol: f32, f: impl Fn(&dyn Backend) -> Result<Vec<Storage>>) {
    let Some(gpu) = gpu_backend() else { return };
    parity_on(&*gpu, name, tol, f);
}

/// `big_parity` on a given wgpu backend.
fn parity_on(gpu: &dyn Backend, name: &str, tol: f32, f: impl Fn(&dyn Backend) -> Result<Vec<Storage>>) {
    let cpu = CpuBackend;
    let want = f(&cpu).unwrap_or_else(|e| panic!("{name} on cpu: {e}"));
    let got = f(gpu).unwrap_or_else(|e| panic!("{name} on wgpu: {e}"));
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.dtype(), w.dtype(), "{name} output {k}");
        if g.dtype() == DType::U32 {
            assert!(read_u32(gpu, g) == read_u32(&cpu, w), "{name} output {k} differs");
            continue;
        }
        let (g, w) = (read_f32(gpu, g), read_f32(&cpu, w));
        assert_eq!(g.len(), w.len(), "{name} output {k}");
        if let Some(i) = (0..g.len()).find(|&i| !((g[i] - w[i]).abs() <= tol * w[i].abs().max(1.0) || g[i] == w[i])) {
            panic!("{name} output {k}: element {i} of {}: wgpu {}, cpu {}", g.len(), g[i], w[i]);
        }
    }
}

#[test]
fn elementwise_random_unary_and_binary_kernels_past_65535_workgroups() {
    big_parity("random/unary/binary", 1e-6, |b| {
        let x = b.random(RandomKind::Uniform, N, 11)?;
        let e = b.unary(UnaryOp::Exp, &x, N)?;
        let layout = Layout::contiguous(&[N]);
        let sum = b.binary(BinaryOp::Mul, &x, &layout, &e, &layout)?;
        Ok(vec![x, e, sum])
    });
}

#[test]
fn reduce_argmax_and_softmax_kernels_past_65535_workgroups() {
    big_parity("reduce/argmax/softmax", 1e-6, |b| {
        let x = b.random(RandomKind::Uniform, N, 12)?;
        let dims = ReduceDims { outer: N, len: 1, inner: 1 };
        let max = b.reduce(ReduceOp::Max, &x, dims)?;
        let arg = b.argmax(&x, dims)?;
        let p = b.softmax(&x, N, 1, false)?;
        let lp = b.softmax(&x, N, 1, true)?;
        let dp = b.softmax_backward(&p, &x, N, 1, false)?;
        Ok(vec![max, arg, p, lp, dp])
    });
}

/// `[batch, m, 1] @ [batch, 1, n]` on wgpu against the product computed directly on the host.
fn outer_products(gpu: &Device, batch: usize, m: usize, n: usize) {
    let cpu = Device::cpu();
    let make = |d: &Device| {
        let a = RawTensor::rand_uniform(&[batch, m, 1], -1.0, 1.0, 21, d).unwrap();
        let b = RawTensor::rand_uniform(&[batch, 1, n], -1.0, 1.0, 22, d).unwrap();
        (a, b)
    };
    let (a, b) = make(&cpu);
    let (a, b) = (a.to_vec().unwrap(), b.to_vec().unwrap());
    let mut want = Vec::with_capacity(batch * m * n);
    for k in 0..batch {
        for i in 0..m {
            want.extend(b[k * n..(k + 1) * n].iter().map(|v| a[k * m + i] * v));
        }
    }
    let (a, b) = make(gpu);
    let got = a.matmul(&b).unwrap().to_vec().unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "batched matmul {batch}x{m}x1x{n} differs from the direct product");
}

#[test]
fn batched_matmul_of_one_output_per_invocation_past_65535_workgroups() {
    let Some(gpu) = wgpu_or_skip() else { return };
    outer_products(&gpu, N, 1, 1);
}

#[test]
#[ignore = "8 s on lavapipe (65,600 workgroups of 64x64 tiles); run with --ignored on a real GPU"]
fn batched_tiled_matmul_over_more_than_65535_batch_entries() {
    let Some(gpu) = wgpu_or_skip() else { return };
    // 16×16 outputs take the tiled kernel; its batch axis is the z dimension, walked with a
    // grid stride past 65,535.
    outer_products(&gpu, 65_600, 16, 16);
}

fn geom(batch: usize, (h, w): (usize, usize), k: usize, pad: usize) -> ConvGeom {
    ConvGeom::square(batch, 1, (h, w), k, 1, pad, 1).unwrap()
}

#[test]
fn im2col_col2im_and_pooling_kernels_past_65535_workgroups() {
    // im2col: 30 images of 250×250, 3×3 windows: 16.9M columns entries.
    let g = geom(30, (250, 250), 3, 1);
    assert!(g.batch * 9 * g.out_h * g.out_w > 65_535 * 256);
    big_parity("im2col", 0.0, |b| Ok(vec![b.im2col(&b.random(RandomKind::Uniform, 30 * 250 * 250, 31)?, &g)?]));
    // col2im, pooling and their backward passes over one 4097×4097 image (1×1 windows).
    let g = geom(1, (4097, 4097), 1, 0);
    let n = 4097 * 4097;
    assert!(n > 65_535 * 256);
    big_parity("col2im/pool", 1e-6, |b| {
        let x = b.random(RandomKind::Uniform, n, 32)?;
        let (max, arg) = b.max_pool2d(&x, &g)?;
        let back = b.max_pool2d_backward(&x, &arg, &g)?;
        let avg = b.avg_pool2d(&x, &g)?;
        let col = b.col2im(&x, &g)?;
        Ok(vec![max, arg, back, avg, col])
    });
}

/// Forward and every gradient of a stride-1 convolution (which the CPU backend also convolves
/// fused), from inputs uploaded to `b`: no kernel runs besides the convolution's own.
fn fused_convolution(b: &dyn Backend, args: &Conv2dArgs) -> Result<Vec<Storage>> {
    let g = &args.geom;
    let uniform =
        |len, seed| Ok::<_, Error>(read_f32(&CpuBackend, &CpuBackend.random(RandomKind::Uniform, len, seed)?));
    let weight_len = args.out_channels * g.channels / args.groups * g.kernel_h * g.kernel_w;
    let x = b.from_f32(&uniform(g.batch * g.channels * g.in_h * g.in_w, 51)?)?;
    let w = b.from_f32(&uniform(weight_len, 52)?)?;
    let bias = b.from_f32(&uniform(args.out_channels, 53)?)?;
    let grad = b.from_f32(&uniform(g.batch * args.out_channels * g.out_h * g.out_w, 54)?)?;
    let y = b.conv2d(&x, &w, Some(&bias), args)?.expect("a fused convolution");
    let wanted = Conv2dWanted { x: true, weight: true, bias: true };
    let grads = b.conv2d_backward(&x, &w, &grad, args, wanted)?;
    Ok([Some(y), grads.x, grads.weight, grads.bias].into_iter().flatten().collect())
}

#[test]
fn fused_convolution_kernels_walk_their_tiles_with_a_grid_stride() {
    // The three kernels dispatch min(tiles, limit) workgroups in one dimension, and each walks
    // tiles t = wid, wid + nwg, ... (tile → M tile, N tile, group, split). Past 65,535 tiles
    // only the number of laps changes, so this proxy takes the laps at a small size, on a
    // backend that dispatches at most 20 workgroups per dimension: 2 M tiles × 18 N tiles × 2
    // groups in the forward and the input gradient, 2 × 10 × 2 tiles × 3 splits in the weight
    // gradient. (The reductions behind the bias gradient and the splits fit in 20² workgroups.)
    if wgpu_or_skip().is_none() {
        return;
    }
    let limited = rumus::backend::wgpu::WgpuBackend::with_dispatch_limit(20).unwrap();
    let geom = ConvGeom { channels: 132, ..geom(2, (24, 24), 3, 1) };
    let args = Conv2dArgs { geom, out_channels: 132, groups: 2 };
    parity_on(&limited, "conv2d over 20 workgroups", 1e-4, |b| fused_convolution(b, &args));
}

#[test]
#[ignore = "25 s on lavapipe (65,600 tiles in each of three kernels); run with --ignored on a real GPU"]
fn fused_convolution_kernels_past_65535_workgroups() {
    // Depthwise over 65,600 channels of 8×8: one 64×64 tile per channel in each of the three
    // kernels, so 65,600 tiles for at most 65,535 workgroups of a 1-D dispatch.
    let channels = 65_600;
    let geom = ConvGeom { channels, ..geom(1, (8, 8), 3, 1) };
    let args = Conv2dArgs { geom, out_channels: channels, groups: channels };
    big_parity("conv2d", 1e-5, |b| fused_convolution(b, &args));
}

#[test]
fn index_kernels_past_65535_workgroups() {
    // 17 picks of rows of 2^20 values: 17.8M outputs from a 2M-value source.
    let args = IndexArgs { outer: 1, len: 2, inner: 1 << 20, count: 17 };
    let picks: Vec<u32> = (0..17).map(|j| (j * 5 + 1) % 2).collect();
    big_parity("index_select/index_add", 1e-6, |b| {
        let x = b.random(RandomKind::Uniform, 2 << 20, 41)?;
        let idx = b.from_u32(&picks)?;
        let selected = b.index_select(&x, &idx, &args)?;
        let added = b.index_add(&selected, &idx, &args)?;
        Ok(vec![selected, added])
    });
}

#[test]
fn cross_entropy_kernels_past_65535_workgroups() {
    // A workgroup per row past 65,535 rows (64 classes), and one invocation per row past
    // 65,535 workgroups of 256 rows (one class: the only short-row size under 128 MiB).
    for (rows, classes) in [(70_000, 64), (N, 1)] {
        let args = CrossEntropyArgs { rows, classes, smoothing: 0.1, weighted: false, ignore_index: None };
        let targets: Vec<u32> = (0..rows as u32).map(|r| rumus::rng::pcg_hash(r) % classes as u32).collect();
        big_parity("cross_entropy", 1e-5, |b| {
            let logits = b.random(RandomKind::Normal, rows * classes, 46)?;
            let t = b.from_u32(&targets)?;
            let loss = b.cross_entropy(&logits, &t, None, &args)?;
            let grad = b.cross_entropy_backward(&logits, &t, None, &loss, &args)?;
            Ok(vec![loss, grad])
        });
    }
}

#[test]
fn gather_and_scatter_add_past_65535_workgroups() {
    // One source value per output position (len 1), so the buffers stay under 128 MiB.
    let args = GatherArgs { outer: 1, len: 1, inner: N, count: 1 };
    big_parity("gather/scatter_add", 1e-6, |b| {
        let x = b.random(RandomKind::Uniform, N, 43)?;
        let idx = b.from_u32(&vec![0; N])?;
        let gathered = b.gather(&x, &idx, &args)?;
        let scattered = b.scatter_add(&gathered, &idx, &args)?;
        Ok(vec![gathered, scattered])
    });
}

#[test]
fn fused_optimizer_update_past_65535_workgroups() {
    let step = OptimizerStep::Adam {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        decoupled: true,
        step: 1,
    };
    // Where a gradient is near eps, g/(sqrt(v)+eps) turns one-ulp differences of sqrt into
    // ~1e-3 relative changes of a step of size lr = 1e-2: allow 1% of one step. Both sides get
    // the same inputs: GPU transcendentals may differ from the host's by ulps, and near g = 0
    // (where Box-Muller's cosine crosses zero) that alone exceeds the tolerance (seen on the
    // H200). They are made once, inside `big_parity`, under its host-memory lock.
    let host = |seed| read_f32(&CpuBackend, &CpuBackend.random(RandomKind::Normal, N, seed).unwrap());
    let inputs = std::sync::OnceLock::new();
    big_parity("adam", 1e-4, |b| {
        let (param0, grad0) = inputs.get_or_init(|| (host(44), host(45)));
        let (param, grad) = (b.from_f32(param0)?, b.from_f32(grad0)?);
        let (m, v) = (b.full(N, 0.0)?, b.full(N, 0.0)?);
        b.optimizer_step(&step, &param, &grad, &[&m, &v], N)?;
        Ok(vec![param, m, v])
    });
}

// ----- adapters -----

#[test]
fn an_adapter_that_reports_f16_comes_up_and_runs_f32_kernels() {
    let Some(gpu) = gpu_backend() else { return };
    let ctx = gpu.context();
    if !ctx.adapter_reports_f16() {
        common::skip_loudly(
            "an_adapter_that_reports_f16_comes_up_and_runs_f32_kernels",
            &format!("{} does not report SHADER_F16", ctx.adapter_name()),
        );
        return;
    }
    // lavapipe reports SHADER_F16: this is the f16-reporting case. rumus requests it only with
    // cooperative matrices, for the opt-in tensor-core matmul.
    assert_eq!(ctx.device_has_f16(), ctx.has_tensor_cores(), "SHADER_F16 requested without tensor cores");
    let device = Device::Wgpu(gpu.clone());
    let x = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &device).unwrap();
    let w = RawTensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2], &device).unwrap();
    assert_eq!(x.matmul(&w).unwrap().to_vec().unwrap(), [4.0, 5.0, 10.0, 11.0]);
    let p = x.softmax(-1).unwrap().sum(&[1], false).unwrap().to_vec().unwrap();
    assert!(p.iter().all(|v| (v - 1.0).abs() < 1e-6), "{p:?}");
}

/// Set in the child process of `no_adapter_is_an_error_that_says_how_to_get_one`.
const CHILD: &str = "RUMUS_RELIABILITY_NO_ADAPTER_CHILD";

#[test]
fn no_adapter_is_an_error_that_says_how_to_get_one() {
    if std::env::var_os(CHILD).is_some() {
        // No Vulkan driver is visible in this process.
        let err = Device::wgpu().unwrap_err();
        assert!(matches!(err, Error::Gpu(_)), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("no wgpu adapter found"), "{msg}");
        assert!(msg.contains("apt-get install mesa-vulkan-drivers libvulkan1"), "{msg}");
        assert!(msg.contains("Device::cpu()"), "{msg}");
        assert!(matches!(Device::wgpu(), Err(Error::Gpu(_))), "the second call gives the same error");
        assert!(Device::best().is_cpu(), "best() falls back to the CPU");
        println!("child: no adapter handled");
        return;
    }
    // Re-run this test alone in a child process whose Vulkan loader finds no driver.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_path(module_path!(), "no_adapter_is_an_error_that_says_how_to_get_one"), "--nocapture"])
        .arg("--test-threads=1")
        .env(CHILD, "1")
        .env("VK_ICD_FILENAMES", "/nonexistent/rumus-no-driver.json")
        .env("VK_DRIVER_FILES", "/nonexistent/rumus-no-driver.json")
        .env_remove("RUMUS_DEVICE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child: no adapter handled"),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

// ----- threads -----

#[test]
fn tensors_and_models_on_wgpu_are_used_from_several_threads() {
    let Some(gpu) = wgpu_or_skip() else { return };
    // One tensor read by four threads at once.
    let x = RawTensor::rand_uniform(&[64, 32], -1.0, 1.0, 5, &gpu).unwrap();
    let product = |seed: u64| -> Vec<f32> {
        let w = RawTensor::rand_uniform(&[32, 8], -1.0, 1.0, seed, &gpu).unwrap();
        x.matmul(&w).unwrap().relu().unwrap().sum(&[0], false).unwrap().to_vec().unwrap()
    };
    let sequential: Vec<Vec<f32>> = (0..4).map(product).collect();
    let concurrent: Vec<Vec<f32>> = std::thread::scope(|s| {
        (0..4).map(|k| s.spawn(move || product(k))).collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(sequential, concurrent);

    // Two models trained at the same time on the one device reach the weights of sequential runs.
    let data = regression_data(64, 3).unwrap();
    let train = |seed: u64| -> Vec<(String, Vec<f32>)> {
        let mut model = Reg { fc: Linear::new(&gpu, 4, 1, true, seed).unwrap() };
        model
            .fit(
                &data,
                Fit::epochs(3).batch_size(16).optimizer(Adam::new(0.05)).shuffle_seed(seed).verbose(Verbosity::Quiet),
            )
            .unwrap();
        weights(&model)
    };
    let sequential = (train(1), train(2));
    let concurrent = std::thread::scope(|s| {
        let a = s.spawn(|| train(1));
        let b = s.spawn(|| train(2));
        (a.join().unwrap(), b.join().unwrap())
    });
    for (seq, conc) in [(&sequential.0, &concurrent.0), (&sequential.1, &concurrent.1)] {
        for ((name, a), (_, b)) in seq.iter().zip(conc) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{name}: sequential {a:?}, concurrent {b:?}");
            }
        }
    }
}
