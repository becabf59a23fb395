//! Winograd F(2×2, 3×3) and F(4×4, 3×3) convolutions on wgpu (`ConvAlgorithm::Winograd` and
//! `Winograd4x4`, each forced on a backend of its own since `Auto` keeps software adapters on the
//! implicit GEMM), every test on both: forward with and without
//! bias, input and weight gradients against the CPU backend over paddings 0-2, odd and even
//! outputs (partial tiles), 1×1 and 5×5 images, a weight gradient split in slices, batches 1 and 3, channel counts not multiples
//! of 4; the weight gradient alone on each of its plans (one invocation per output, 64×64,
//! 128×256, 256×128 and 128×128 tiles, split and not, channels padded to 8, paddings 0-2); random
//! shapes and paddings (a property test: the transforms run without injected bounds checks); an
//! ineligible convolution (stride 2) as the implicit GEMM computes it; a convolution with
//! its backward through the op layer on a device built from the forced backend; and, where the
//! adapter has tensor cores, the products on them (`MatmulPrecision::F16TensorCores`).

use std::sync::Arc;

use proptest::prelude::*;

use rumus::backend::cpu::CpuBackend;
use rumus::backend::wgpu::{ConvAlgorithm, WgpuBackend};
use rumus::backend::{Backend, Conv2dArgs, Conv2dWanted, ConvGeom, Storage};
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::{Device, Layout, MatmulPrecision, RawTensor, Result};

/// Deterministic pseudo-random data in [-2, 2).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

/// Which values a pass runs on: `data`'s, or their magnitudes.
#[derive(Clone, Copy, PartialEq)]
enum Values {
    Signed,
    Magnitudes,
}

impl Values {
    fn data(self, len: usize, seed: u64) -> Vec<f32> {
        let v = data(len, seed);
        match self {
            Values::Signed => v,
            Values::Magnitudes => v.into_iter().map(f32::abs).collect(),
        }
    }
}

/// Every element of `got` within `tol` times the largest magnitude (the same sums over the
/// operands' absolute values, from a CPU pass on `Values::Magnitudes`) of `want`. Winograd's
/// transforms mix every value of a tile, added and subtracted in another order than the direct
/// sum, so their rounding scales with the tile's summands, not with the result: a result near
/// zero (by cancellation, or from few taps at a padded edge) may be off by far more than its
/// own size. A wrong tap or tile is off by a whole summand, orders of magnitude beyond this
/// bound.
fn assert_within(what: &str, got: &[f32], want: &[f32], magnitude: &[f32], tol: f32) {
    assert_eq!((got.len(), want.len()), (magnitude.len(), magnitude.len()), "{what}: lengths");
    let bound = tol * magnitude.iter().fold(1f32, |m, v| m.max(*v));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= bound, "{what}: element {i} of {}: got {g}, want {w} (allowed {bound})", got.len());
    }
}

fn read(b: &dyn Backend, s: &Storage) -> Vec<f32> {
    b.to_f32(s, &Layout::contiguous(&[s.len()])).unwrap()
}

/// Both forced-Winograd backends, F(2×2, 3×3) and F(4×4, 3×3), or none without an adapter.
fn winograds() -> Vec<WgpuBackend> {
    if wgpu_or_skip().is_none() {
        return Vec::new();
    }
    [ConvAlgorithm::Winograd, ConvAlgorithm::Winograd4x4]
        .map(|algorithm| {
            let b = WgpuBackend::with_conv_algorithm(algorithm).unwrap();
            assert_eq!(b.conv_algorithm(), algorithm);
            b
        })
        .into()
}

/// Forward (with `bias` or not) and all three gradients of one convolution on `b`.
fn conv_pass(b: &dyn Backend, a: &Conv2dArgs, bias: bool, seed: u64) -> Result<Vec<Vec<f32>>> {
    conv_pass_on(b, a, bias, seed, Values::Signed)
}

/// `conv_pass` on `values`.
fn conv_pass_on(b: &dyn Backend, a: &Conv2dArgs, bias: bool, seed: u64, values: Values) -> Result<Vec<Vec<f32>>> {
    let g = &a.geom;
    let data = |len: usize, seed: u64| values.data(len, seed);
    let x = b.from_f32(&data(g.batch * g.channels * g.in_h * g.in_w, seed))?;
    let w = b.from_f32(&data(a.out_channels * g.channels / a.groups * 9, seed + 1))?;
    let bias = if bias { Some(b.from_f32(&data(a.out_channels, seed + 2))?) } else { None };
    let grad = b.from_f32(&data(g.batch * a.out_channels * g.out_h * g.out_w, seed + 3))?;
    let y = b.conv2d(&x, &w, bias.as_ref(), a)?.expect("a fused stride-1 convolution");
    let grads = b.conv2d_backward(&x, &w, &grad, a, Conv2dWanted { x: true, weight: true, bias: false })?;
    Ok([Some(y), grads.x, grads.weight].into_iter().flatten().map(|s| read(b, &s)).collect())
}

fn args(batch: usize, channels: usize, size: (usize, usize), pad: usize, out_channels: usize) -> Conv2dArgs {
    Conv2dArgs { geom: ConvGeom::square(batch, channels, size, 3, 1, pad, 1).unwrap(), out_channels, groups: 1 }
}

/// `conv_pass` of `a` on `gpu` against the CPU: forward and both gradients, to
/// [`WINOGRAD_TOL`] of the largest magnitude.
fn assert_matches_the_cpu(gpu: &WgpuBackend, a: &Conv2dArgs, bias: bool, seed: u64) {
    let want = conv_pass(&CpuBackend, a, bias, seed).unwrap();
    let magnitudes = conv_pass_on(&CpuBackend, a, bias, seed, Values::Magnitudes).unwrap();
    let got = conv_pass(gpu, a, bias, seed).unwrap_or_else(|e| panic!("{a:?}: {e}"));
    for (name, ((g, w), m)) in
        ["forward", "input gradient", "weight gradient"].iter().zip(got.iter().zip(&want).zip(&magnitudes))
    {
        let what = format!("{:?} {name} of {a:?} (bias {bias})", gpu.conv_algorithm());
        assert_within(&what, g, w, m, WINOGRAD_TOL);
    }
}

/// The rounding allowed per unit of magnitude (see [`assert_within`]): f32's 2^-24 times the
/// growth of F(4×4, 3×3)'s transforms (entries up to 8 on the output side, sums of up to 36
/// terms), with room; F(2×2, 3×3) stays far inside it.
const WINOGRAD_TOL: f32 = 1e-5;

#[test]
fn winograd_matches_the_cpu_convolution_forward_and_backward() {
    let cases = [
        // pad 1, even and odd outputs, channels not multiples of 4.
        args(1, 3, (6, 6), 1, 5),
        args(3, 5, (7, 5), 1, 6),
        // pad 0 (outputs 4×3: a partial tile column) and pad 2 (outputs 9×8).
        args(2, 4, (6, 5), 0, 3),
        args(1, 6, (7, 6), 2, 7),
        // 1×1 images (pad 1 and 2) and 5×5.
        args(3, 2, (1, 1), 1, 3),
        args(1, 3, (1, 1), 2, 2),
        args(3, 7, (5, 5), 1, 9),
        args(1, 1, (5, 5), 0, 1),
        // 300 tiles: the weight gradient's product in two slices, the second padded.
        args(3, 2, (20, 20), 1, 3),
        // Outputs a multiple of 4 wide, which F(4×4, 3×3) writes as vec4s: the forward's and
        // the input gradient's (pad 1), the input gradient's only (pad 0: forward 6 wide; pad 2:
        // forward 10 wide).
        args(2, 5, (8, 12), 1, 6),
        args(1, 3, (8, 8), 0, 4),
        args(1, 4, (6, 8), 2, 5),
        // Enough channels for the tiled matmul kernels, a pad mixing 0 and 2.
        Conv2dArgs {
            geom: ConvGeom {
                pad_h: 2,
                pad_w: 0,
                out_h: 8,
                out_w: 3,
                ..ConvGeom::square(2, 20, (6, 5), 3, 1, 0, 1).unwrap()
            },
            out_channels: 17,
            groups: 1,
        },
    ];
    for gpu in winograds() {
        for (k, a) in cases.iter().enumerate() {
            for bias in [false, true] {
                assert_matches_the_cpu(&gpu, a, bias, 10 * k as u64 + bias as u64);
            }
        }
    }
}

/// The weight gradient alone (x and the output gradient random, or `values`' magnitudes), on `b`.
fn weight_grad(b: &dyn Backend, a: &Conv2dArgs, seed: u64, values: Values) -> Result<Vec<f32>> {
    let g = &a.geom;
    let data = |len: usize, seed: u64| values.data(len, seed);
    let x = b.from_f32(&data(g.batch * g.channels * g.in_h * g.in_w, seed))?;
    let w = b.from_f32(&data(a.out_channels * g.channels * 9, seed + 1))?;
    let grad = b.from_f32(&data(g.batch * a.out_channels * g.out_h * g.out_w, seed + 3))?;
    let grads = b.conv2d_backward(&x, &w, &grad, a, Conv2dWanted { x: false, weight: true, bias: false })?;
    Ok(read(b, &grads.weight.expect("a weight gradient")))
}

/// Each plan of the weight gradient's products (`weight_grad_plan` in
/// `rumus/src/backend/wgpu/winograd.rs`; the large tiles where the adapter runs them, 64×64
/// tiles in their place otherwise) against the CPU. The tile matrices have O and C rounded up
/// to 8 rows and P to the slices; the padding must add nothing.
#[test]
fn winograd_weight_gradient_matches_the_cpu_on_every_plan() {
    let cases = [
        // One invocation per output (C rounded up to 8 < 16): pad 2, one slice and, at 605
        // tiles, two.
        args(2, 6, (19, 20), 2, 5),
        args(5, 6, (19, 20), 2, 5),
        // 64×64 tiles, channels 17 and 20 (rows 24): 512 tiles in two slices of 256, a partial
        // tile column (31 wide).
        args(2, 17, (32, 31), 1, 20),
        // pad 0, 13 × 9 channels (rows 16): 550 tiles in two slices of 276, the last padded.
        args(5, 9, (22, 23), 0, 13),
        // 128 × 256 (the wide tile), 256 × 128 (the tall one) and 128 × 128 (the square one;
        // without the large tiles' resources all three), one slice of 12, 9 and 9 tiles.
        args(1, 256, (6, 7), 1, 128),
        args(1, 128, (5, 5), 1, 256),
        args(1, 128, (5, 6), 2, 128),
        // The wide (or square) tile over 512 tiles in two slices.
        args(2, 256, (32, 32), 1, 128),
    ];
    for gpu in winograds() {
        for (k, a) in cases.iter().enumerate() {
            let want = weight_grad(&CpuBackend, a, k as u64, Values::Signed).unwrap();
            let magnitudes = weight_grad(&CpuBackend, a, k as u64, Values::Magnitudes).unwrap();
            let got = weight_grad(&gpu, a, k as u64, Values::Signed).unwrap_or_else(|e| panic!("{a:?}: {e}"));
            let what = format!("{:?} weight gradient of {a:?}", gpu.conv_algorithm());
            assert_within(&what, &got, &want, &magnitudes, WINOGRAD_TOL);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// The Winograd transforms are compiled without wgpu's injected bounds checks (a trusted
    /// module, `pipelines.rs`), so every shape must keep their tile and plane indices inside the
    /// buffers: random batches, channels, image sizes (partial tiles on either side) and paddings,
    /// forward with or without bias and both gradients, against the CPU.
    #[test]
    fn winograd_matches_the_cpu_over_random_shapes(
        batch in 1usize..4,
        channels in 1usize..24,
        out_channels in 1usize..24,
        size in (1usize..12, 1usize..12),
        pad in 0usize..3,
        bias in any::<bool>(),
        seed in 0u64..1000,
    ) {
        // A 3×3 window needs size + 2·pad ≥ 3.
        prop_assume!(size.0 + 2 * pad >= 3 && size.1 + 2 * pad >= 3);
        for gpu in winograds() {
            assert_matches_the_cpu(&gpu, &args(batch, channels, size, pad, out_channels), bias, seed);
        }
    }
}

/// A strided convolution is not Winograd's: the forced backend computes it on the implicit GEMM,
/// value for value.
#[test]
fn an_ineligible_convolution_runs_on_the_implicit_gemm() {
    let Some(gemm) = wgpu_or_skip().map(|_| WgpuBackend::with_conv_algorithm(ConvAlgorithm::ImplicitGemm).unwrap())
    else {
        return;
    };
    let a = Conv2dArgs { geom: ConvGeom::square(2, 3, (7, 7), 3, 2, 1, 1).unwrap(), out_channels: 4, groups: 1 };
    let want = conv_pass(&gemm, &a, true, 5).unwrap();
    for gpu in winograds() {
        let got = conv_pass(&gpu, &a, true, 5).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "stride 2 on the forced {:?} backend", gpu.conv_algorithm());
        }
    }
}

/// `RawTensor::conv2d` and its backward on a device of the forced backend, against the CPU.
#[test]
fn the_op_layer_runs_winograd_convolutions() {
    let run = |device: &Device| -> Result<Vec<Vec<f32>>> {
        let x = RawTensor::from_slice(&data(2 * 3 * 5 * 6, 1), &[2, 3, 5, 6], device)?.requires_grad_()?;
        let w = RawTensor::from_slice(&data(4 * 3 * 9, 2), &[4, 3, 3, 3], device)?.requires_grad_()?;
        let b = RawTensor::from_slice(&data(4, 3), &[4], device)?.requires_grad_()?;
        let y = x.conv2d(&w, Some(&b), (1, 1), (1, 1), (1, 1), 1)?;
        let weights = RawTensor::from_slice(&data(y.numel(), 4), y.shape(), device)?;
        let grads = y.mul(&weights)?.sum_all()?.backward()?;
        let mut out = vec![y.to_vec()?];
        for leaf in [&x, &w, &b] {
            out.push(grads.get(leaf).expect("a gradient").to_vec()?);
        }
        Ok(out)
    };
    let want = run(&Device::Cpu).unwrap();
    for gpu in winograds() {
        let algorithm = gpu.conv_algorithm();
        let got = run(&Device::Wgpu(Arc::new(gpu))).unwrap();
        for (name, (g, w)) in ["y", "dx", "dw", "db"].iter().zip(got.iter().zip(&want)) {
            assert_close(&format!("op-layer {algorithm:?} {name}"), g, w, 1e-4);
        }
    }
}

/// With `MatmulPrecision::F16TensorCores`, Winograd's 16 products run on tensor cores: where the
/// adapter has them, the forward and both gradients agree with the CPU's f32 convolution to the
/// f16 rounding of the transformed operands, and differ from the f32 Winograd's (so the
/// tensor-core kernel really ran). Shapes from 128 channels (below, the products stay f32: see
/// `winograd_products_stay_f32_below_128_channels`), in multiples of 8 (the tensor-core kernel
/// reads vec4s), partial tiles, at least 16 tiles of 4×4 (fewer columns run on the per-output
/// kernel, in f32 at either precision) and weight gradients over 400 and 1600 tiles (split
/// slices).
#[test]
fn winograd_on_tensor_cores_matches_to_f16_rounding() {
    for f32_gpu in winograds() {
        let tc = WgpuBackend::with_conv_algorithm(f32_gpu.conv_algorithm()).unwrap();
        if !tc.context().has_tensor_cores() {
            assert!(tc.set_matmul_precision(MatmulPrecision::F16TensorCores).is_err());
            return;
        }
        tc.set_matmul_precision(MatmulPrecision::F16TensorCores).unwrap();
        on_tensor_cores_matches_to_f16_rounding(&f32_gpu, &tc);
    }
}

/// `winograd_on_tensor_cores_matches_to_f16_rounding` for one algorithm: `tc` on tensor cores,
/// `f32_gpu` without them.
fn on_tensor_cores_matches_to_f16_rounding(f32_gpu: &WgpuBackend, tc: &WgpuBackend) {
    let algorithm = tc.conv_algorithm();
    for (i, a) in [args(2, 128, (16, 16), 1, 128), args(3, 136, (18, 14), 1, 128), args(4, 128, (40, 40), 1, 128)]
        .iter()
        .enumerate()
    {
        let seed = 40 + 10 * i as u64;
        let want = conv_pass(&CpuBackend, a, true, seed).unwrap();
        let got = conv_pass(tc, a, true, seed).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        let exact = conv_pass(f32_gpu, a, true, seed).unwrap();
        for (name, ((g, w), e)) in
            ["forward", "input gradient", "weight gradient"].iter().zip(got.iter().zip(&want).zip(&exact))
        {
            // Operands in [-2, 2) rounded to f16 (relative error 2^-11) after transforms that
            // add up to 4 (F(2×2, 3×3)) or 36 (F(4×4, 3×3), weights up to 64 and 1/576) of
            // them: the sums' error is a small fraction of their largest value, while a wrong
            // element would be off by about that value itself.
            let largest = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = g.iter().zip(w).fold(0f32, |m, (g, w)| m.max((g - w).abs()));
            assert!(worst <= 1e-2 * largest, "tensor-core {algorithm:?} {name} of {a:?}: off by {worst} of {largest}");
            assert!(g != e, "tensor-core {algorithm:?} {name} of {a:?}: bit-identical to f32, so f32 kernels ran");
        }
    }
}

/// With `MatmulPrecision::F16TensorCores`, a Winograd convolution under 128 channels on either
/// side (ResNet's first stage) keeps its products on the f32 tiles, where they were measured
/// faster: every pass is bit-identical to the f32 backend's.
#[test]
fn winograd_products_stay_f32_below_128_channels() {
    for f32_gpu in winograds() {
        let algorithm = f32_gpu.conv_algorithm();
        let tc = WgpuBackend::with_conv_algorithm(algorithm).unwrap();
        if tc.set_matmul_precision(MatmulPrecision::F16TensorCores).is_err() {
            return;
        }
        for (i, a) in
            [args(2, 64, (8, 8), 1, 64), args(3, 128, (9, 7), 1, 64), args(4, 64, (20, 20), 1, 128)].iter().enumerate()
        {
            let seed = 90 + 10 * i as u64;
            let got = conv_pass(&tc, a, true, seed).unwrap_or_else(|e| panic!("{a:?}: {e}"));
            let exact = conv_pass(&f32_gpu, a, true, seed).unwrap();
            for (name, (g, e)) in ["forward", "input gradient", "weight gradient"].iter().zip(got.iter().zip(&exact)) {
                assert!(g == e, "{algorithm:?} {name} of {a:?} on a tensor-core backend differs from f32");
            }
        }
    }
}
