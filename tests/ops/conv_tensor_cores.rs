//! The convolution's implicit GEMMs on tensor cores (`conv2d_coop.wgsl`): with
//! `MatmulPrecision::F16TensorCores`, a convolution of one group that Winograd does not take
//! (strides, 1×1 and other kernel sizes, dilation, few channels) runs its forward and weight
//! gradient with f16 operands and f32 sums, and its input gradient on the f32 kernel. Each pass
//! is checked against a direct f64 loop to the operands' f16 rounding, element by element, and
//! against the f32 kernels' result: the forward and weight gradient must differ from it (else the
//! f32 kernels ran), the input gradient must equal it. The shapes cross every edge of the 128×256
//! tiles: partial and whole tiles on each side, planes whose pixels are not a multiple of 16 (the
//! stores through workgroup memory), channel counts not a multiple of 4, several output-channel
//! tiles, weight gradients split over the batch and forwards over K; every other forward has a
//! bias. Only NVIDIA-class adapters have tensor cores; elsewhere the tests check that they are
//! refused.

use rumus::backend::wgpu::{ConvAlgorithm, WgpuBackend};
use rumus::backend::{Backend, Conv2dArgs, Conv2dWanted, ConvGeom, Storage};
use rumus::testing::wgpu_or_skip;
use rumus::{Layout, MatmulPrecision, Result};

/// Deterministic pseudo-random data in [-2, 2).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

struct Operands {
    x: Vec<f32>,
    w: Vec<f32>,
    bias: Vec<f32>,
    grad: Vec<f32>,
}

fn operands(a: &Conv2dArgs, seed: u64) -> Operands {
    let g = &a.geom;
    Operands {
        x: data(g.batch * g.channels * g.in_h * g.in_w, seed),
        w: data(a.out_channels * g.channels / a.groups * g.kernel_h * g.kernel_w, seed + 1),
        bias: data(a.out_channels, seed + 2),
        grad: data(g.batch * a.out_channels * g.out_h * g.out_w, seed + 3),
    }
}

/// Forward (with the bias or not), input gradient and weight gradient on `b`.
fn on_backend(b: &dyn Backend, a: &Conv2dArgs, v: &Operands, bias: bool) -> Result<[Vec<f32>; 3]> {
    let read = |s: &Storage| b.to_f32(s, &Layout::contiguous(&[s.len()]));
    let (x, w, grad) = (b.from_f32(&v.x)?, b.from_f32(&v.w)?, b.from_f32(&v.grad)?);
    let bias = if bias { Some(b.from_f32(&v.bias)?) } else { None };
    let y = b.conv2d(&x, &w, bias.as_ref(), a)?.expect("the wgpu backend fuses every convolution");
    let grads = b.conv2d_backward(&x, &w, &grad, a, Conv2dWanted { x: true, weight: true, bias: false })?;
    Ok([read(&y)?, read(&grads.x.expect("dx"))?, read(&grads.weight.expect("dw"))?])
}

/// The three passes by direct loops in f64, each with the sum of its terms' magnitudes.
fn reference(a: &Conv2dArgs, v: &Operands, bias: bool) -> [(Vec<f64>, Vec<f64>); 3] {
    let g = &a.geom;
    let (cg, og) = (g.channels / a.groups, a.out_channels / a.groups);
    let mut y = vec![(0f64, 0f64); g.batch * a.out_channels * g.out_h * g.out_w];
    let mut dx = vec![(0f64, 0f64); v.x.len()];
    let mut dw = vec![(0f64, 0f64); v.w.len()];
    for n in 0..g.batch {
        for o in 0..a.out_channels {
            let group = o / og;
            for oh in 0..g.out_h {
                for ow in 0..g.out_w {
                    let yi = ((n * a.out_channels + o) * g.out_h + oh) * g.out_w + ow;
                    if bias {
                        y[yi] = (v.bias[o] as f64, (v.bias[o] as f64).abs());
                    }
                    let go = v.grad[yi] as f64;
                    for c in 0..cg {
                        for kh in 0..g.kernel_h {
                            for kw in 0..g.kernel_w {
                                let ih = (oh * g.stride_h + kh * g.dilation_h) as isize - g.pad_h as isize;
                                let iw = (ow * g.stride_w + kw * g.dilation_w) as isize - g.pad_w as isize;
                                if ih < 0 || iw < 0 || ih >= g.in_h as isize || iw >= g.in_w as isize {
                                    continue;
                                }
                                let xi =
                                    ((n * g.channels + group * cg + c) * g.in_h + ih as usize) * g.in_w + iw as usize;
                                let wi = ((o * cg + c) * g.kernel_h + kh) * g.kernel_w + kw;
                                let (xv, wv) = (v.x[xi] as f64, v.w[wi] as f64);
                                y[yi].0 += xv * wv;
                                y[yi].1 += (xv * wv).abs();
                                dx[xi].0 += go * wv;
                                dx[xi].1 += (go * wv).abs();
                                dw[wi].0 += go * xv;
                                dw[wi].1 += (go * xv).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    [y, dx, dw].map(|r| r.into_iter().unzip())
}

/// Operands rounded to f16 (relative error 2^-11 each): every product within about 2^-10 of
/// its magnitude, and the f32 sums add far less. A wrong tap is off by a whole term.
const F16_TOL: f64 = 2e-3;
/// f32 operands and sums: within this of the terms' magnitudes, far inside F16_TOL.
const F32_TOL: f64 = 1e-5;

/// `[batch, channels, size]` by `out_channels` filters of `[kernel, stride, pad, dilation]`.
fn args(batch: usize, channels: usize, size: (usize, usize), window: [usize; 4], out_channels: usize) -> Conv2dArgs {
    let [kernel, stride, pad, dilation] = window;
    let geom = ConvGeom::square(batch, channels, size, kernel, stride, pad, dilation).expect("a valid geometry");
    Conv2dArgs { geom, out_channels, groups: 1 }
}

/// The shapes of the tests (see the module's documentation).
fn shapes() -> Vec<Conv2dArgs> {
    vec![
        // ResNet's stride-2 3×3 and 1×1 convolutions, small: whole tiles of the forward (128
        // output channels, 512 pixels) and of the weight gradient's first columns (288 wide).
        args(2, 32, (16, 16), [3, 2, 1, 1], 128),
        args(2, 16, (32, 32), [1, 2, 0, 1], 128),
        // Whole tiles of the input columns (144 rows, 512 pixels); 3 input channels (a stem).
        args(2, 16, (16, 16), [3, 1, 1, 1], 128),
        args(4, 3, (32, 32), [3, 1, 1, 1], 64),
        // Planes of 42 and 25 pixels, channels not a multiple of 4, two output-channel tiles.
        args(3, 5, (13, 11), [3, 2, 1, 1], 7),
        args(4, 64, (9, 9), [1, 2, 0, 1], 130),
        // A dilated 5×5 kernel.
        args(2, 6, (12, 12), [5, 1, 4, 2], 20),
        // Weight gradients split over the batch: 4096 and 2025 pixels.
        args(16, 8, (32, 32), [3, 2, 1, 1], 16),
        args(9, 8, (30, 30), [3, 2, 1, 1], 16),
        // Forwards of one tile over a long K (576), with a bias (unsplit) and without (split).
        args(2, 64, (8, 8), [3, 2, 1, 1], 32),
        args(2, 64, (8, 8), [3, 2, 1, 1], 32),
    ]
}

/// The backend on tensor cores and one without, or `None` (after checking that tensor cores are
/// refused) on an adapter without them.
fn backends() -> Option<(WgpuBackend, WgpuBackend)> {
    wgpu_or_skip()?;
    let tc = WgpuBackend::with_conv_algorithm(ConvAlgorithm::Auto).unwrap();
    if !tc.context().has_tensor_cores() {
        assert!(tc.set_matmul_precision(MatmulPrecision::F16TensorCores).is_err());
        return None;
    }
    tc.set_matmul_precision(MatmulPrecision::F16TensorCores).unwrap();
    Some((tc, WgpuBackend::with_conv_algorithm(ConvAlgorithm::Auto).unwrap()))
}

#[test]
fn convolutions_on_tensor_cores_match_to_f16_rounding() {
    let Some((tc, f32_gpu)) = backends() else { return };
    for (i, a) in shapes().iter().enumerate() {
        // Every other forward with a bias, from which its sums start.
        let bias = i % 2 == 1;
        let v = operands(a, 700 + 10 * i as u64);
        let want = reference(a, &v, bias);
        let got = on_backend(&tc, a, &v, bias).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        let exact = on_backend(&f32_gpu, a, &v, bias).unwrap();
        for (name, ((g, (w, m)), e)) in
            ["forward", "input gradient", "weight gradient"].iter().zip(got.iter().zip(&want).zip(&exact))
        {
            for (j, ((g, w), m)) in g.iter().zip(w).zip(m).enumerate() {
                let bound = F16_TOL * m + 1e-6;
                assert!(
                    (*g as f64 - w).abs() <= bound,
                    "{name} of {a:?} (bias {bias}): element {j}: got {g}, want {w} (allowed {bound})"
                );
            }
            if *name == "input gradient" {
                // f32 sums of f32 products (the kernels may still be stand-ins, which add in
                // another order): far inside f16's rounding.
                for (j, ((g, e), m)) in g.iter().zip(e).zip(m).enumerate() {
                    let bound = F32_TOL * m + 1e-6;
                    assert!((g - e).abs() as f64 <= bound, "{name} of {a:?}: element {j} left the f32 kernel");
                }
            } else {
                assert!(g != e, "{name} of {a:?}: bit-identical to f32, so the f32 kernels ran");
            }
        }
    }
}

/// With at most 3 workgroups per dispatch dimension, the kernels walk their tiles (over more
/// than 3 columns of tiles, then more than 3 rows) and the weight gradient's splits (4) with grid
/// strides, to the same values. The shapes keep the kernels around them (the f32 input gradient,
/// the reduction of the splits) within 3 × 3 workgroups; the second forward has a bias, so it is
/// not split.
#[test]
fn tensor_core_convolutions_walk_their_tiles_with_a_grid_stride() {
    let Some((tc, _)) = backends() else { return };
    let capped = WgpuBackend::with_dispatch_limit(3).unwrap();
    capped.set_matmul_precision(MatmulPrecision::F16TensorCores).unwrap();
    for (i, (a, bias)) in
        [(args(1, 2, (32, 32), [3, 1, 2, 2], 2), false), (args(1, 16, (4, 4), [3, 1, 2, 2], 400), true)]
            .iter()
            .enumerate()
    {
        let v = operands(a, 800 + 10 * i as u64);
        let want = on_backend(&tc, a, &v, *bias).unwrap();
        let got = on_backend(&capped, a, &v, *bias).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        for (name, (g, w)) in ["forward", "weight gradient"].iter().zip([(&got[0], &want[0]), (&got[2], &want[2])]) {
            assert!(g == w, "{name} of {a:?} with 3 workgroups per dimension differs");
        }
    }
}

/// Grouped convolutions stay on the f32 GEMM in every pass.
#[test]
fn grouped_convolutions_stay_on_the_f32_gemm() {
    let Some((tc, f32_gpu)) = backends() else { return };
    let grouped = Conv2dArgs { groups: 2, ..args(2, 32, (16, 16), [3, 2, 1, 1], 64) };
    let v = operands(&grouped, 910);
    let got = on_backend(&tc, &grouped, &v, false).unwrap();
    let exact = on_backend(&f32_gpu, &grouped, &v, false).unwrap();
    let want = reference(&grouped, &v, false);
    for ((g, e), (w, _)) in got.iter().zip(&exact).zip(&want) {
        assert!(g == e, "a grouped convolution left the f32 GEMM");
        let worst = g.iter().zip(w).fold(0f64, |m, (g, w)| m.max((*g as f64 - w).abs()));
        assert!(worst < 1e-3, "grouped convolution off by {worst}");
    }
}
