//! Value tests against naive reference loops (or hand-computed numbers) and finite-difference
//! gradient checks for the neural-network ops: conv2d, pooling, normalisation, dropout,
//! indexing, concat/stack and the losses.

use rumus::testing::{grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, Result, RunningStats};

fn cpu() -> Device {
    Device::cpu()
}

fn t(data: &[f32], shape: &[usize]) -> RawTensor {
    RawTensor::from_slice(data, shape, &cpu()).unwrap()
}

fn idx(data: &[u32], shape: &[usize]) -> RawTensor {
    RawTensor::from_indices(data, shape, &cpu()).unwrap()
}

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &cpu()).unwrap()
}

/// Values spaced 0.05 apart in scrambled order: no two are within the finite-difference step,
/// so a max never switches winner during a gradient check.
fn distinct(shape: &[usize], salt: usize) -> RawTensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7919 + salt * 31) % n) as f32 * 0.05 - 1.0).collect();
    t(&data, shape)
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * w.abs().max(1.0), "element {i}: got {g}, want {w}");
    }
}

/// Row-major index of `[a, b, c, d]` in a 4-D shape.
fn at4(shape: &[usize], a: usize, b: usize, c: usize, d: usize) -> usize {
    ((a * shape[1] + b) * shape[2] + c) * shape[3] + d
}

struct ConvCase {
    x: [usize; 4],
    out_channels: usize,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
    bias: bool,
}

/// Direct-loop convolution, the definition PyTorch documents.
fn naive_conv2d(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    b: Option<&[f32]>,
    c: &ConvCase,
) -> (Vec<f32>, [usize; 4]) {
    let (n, ch, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (o, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    let oh = (h + 2 * c.padding.0 - c.dilation.0 * (kh - 1) - 1) / c.stride.0 + 1;
    let ow = (wd + 2 * c.padding.1 - c.dilation.1 * (kw - 1) - 1) / c.stride.1 + 1;
    let og = o / c.groups;
    let os = [n, o, oh, ow];
    let mut out = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[oc]);
                    for cl in 0..cg {
                        let ci = g * cg + cl;
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let ii = (i * c.stride.0 + ki * c.dilation.0) as isize - c.padding.0 as isize;
                                let jj = (j * c.stride.1 + kj * c.dilation.1) as isize - c.padding.1 as isize;
                                if ii < 0 || jj < 0 || ii >= h as isize || jj >= wd as isize {
                                    continue;
                                }
                                acc += x[at4(&xs, ni, ci, ii as usize, jj as usize)] * w[at4(&ws, oc, cl, ki, kj)];
                            }
                        }
                    }
                    out[at4(&os, ni, oc, i, j)] = acc;
                }
            }
        }
    }
    let _ = ch;
    (out, os)
}

fn conv_cases() -> Vec<ConvCase> {
    let base = ConvCase {
        x: [2, 4, 6, 5],
        out_channels: 6,
        kernel: (3, 3),
        stride: (1, 1),
        padding: (0, 0),
        dilation: (1, 1),
        groups: 1,
        bias: true,
    };
    vec![
        ConvCase { ..base },
        ConvCase { stride: (2, 1), padding: (1, 2), ..base },
        ConvCase { dilation: (2, 1), padding: (1, 1), bias: false, ..base },
        ConvCase { groups: 2, kernel: (2, 3), stride: (2, 2), padding: (1, 0), ..base },
        // Depthwise: one group per channel.
        ConvCase { out_channels: 8, groups: 4, padding: (1, 1), ..base },
        ConvCase { x: [1, 3, 4, 4], out_channels: 2, kernel: (1, 1), ..base },
    ]
}

#[test]
fn conv2d_matches_a_direct_loop_for_stride_padding_dilation_and_groups() -> Result<()> {
    for (k, case) in conv_cases().iter().enumerate() {
        let x = randn(&case.x, 10 + k as u64);
        let ws = [case.out_channels, case.x[1] / case.groups, case.kernel.0, case.kernel.1];
        let w = randn(&ws, 20 + k as u64);
        let b = randn(&[case.out_channels], 30 + k as u64);
        let bias = case.bias.then_some(&b);
        let got = x.conv2d(&w, bias, case.stride, case.padding, case.dilation, case.groups)?;
        let bias_values = b.to_vec()?;
        let (want, want_shape) =
            naive_conv2d(&x.to_vec()?, case.x, &w.to_vec()?, ws, case.bias.then_some(&bias_values[..]), case);
        assert_eq!(got.shape(), want_shape, "case {k}");
        assert_close(&got.to_vec()?, &want, 1e-4);
    }
    Ok(())
}

fn check_conv2d_gradients(device: &Device) -> Result<()> {
    for (k, case) in conv_cases().iter().enumerate() {
        let x = randn(&[1, case.x[1], 5, 4], 40 + k as u64).to_device(device)?;
        let ws = [case.out_channels, case.x[1] / case.groups, case.kernel.0, case.kernel.1];
        let w = randn(&ws, 50 + k as u64).mul_scalar(0.5)?.to_device(device)?;
        let b = randn(&[case.out_channels], 60 + k as u64).to_device(device)?;
        let c = case;
        grad_check(&[x, w, b], GradCheck::default(), |i| {
            let bias = c.bias.then_some(&i[2]);
            i[0].conv2d(&i[1], bias, c.stride, c.padding, c.dilation, c.groups)
        })
        .unwrap_or_else(|e| panic!("{device} case {k}: {e}"));
    }
    Ok(())
}

#[test]
fn conv2d_gradients_match_finite_differences() -> Result<()> {
    check_conv2d_gradients(&cpu())
}

/// The wgpu backend's own convolution kernels, against finite differences rather than the CPU.
#[test]
fn conv2d_gradients_match_finite_differences_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_conv2d_gradients(&gpu)
}

#[test]
fn conv2d_on_broadcast_and_non_contiguous_inputs() -> Result<()> {
    // A [1, c, h, w] input broadcast over a batch of 2, and a transposed (non-contiguous) input.
    let x = randn(&[1, 2, 4, 5], 70);
    let w = randn(&[3, 2, 3, 3], 71);
    grad_check(&[x.clone(), w.clone()], GradCheck::default(), |i| {
        i[0].broadcast_to(&[2, 2, 4, 5])?.conv2d(&i[1], None, (1, 1), (1, 1), (1, 1), 1)
    })?;
    let xt = randn(&[1, 2, 5, 4], 72);
    grad_check(&[xt.clone(), w.clone()], GradCheck::default(), |i| {
        i[0].transpose(2, 3)?.conv2d(&i[1], None, (2, 1), (0, 1), (1, 1), 1)
    })?;
    let direct = xt.transpose(2, 3)?.contiguous()?.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1)?;
    let strided = xt.transpose(2, 3)?.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1)?;
    assert_eq!(direct.to_vec()?, strided.to_vec()?);
    Ok(())
}

#[test]
fn conv2d_hand_computed_value() -> Result<()> {
    // Kernel [[1, 0], [0, 1]] adds each pixel to its lower-right neighbour.
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &[1, 1, 3, 3]);
    let w = t(&[1.0, 0.0, 0.0, 1.0], &[1, 1, 2, 2]);
    let b = t(&[0.5], &[1]);
    let y = x.conv2d(&w, Some(&b), (1, 1), (0, 0), (1, 1), 1)?;
    assert_eq!(y.shape(), &[1, 1, 2, 2]);
    assert_eq!(y.to_vec()?, vec![6.5, 8.5, 12.5, 14.5]);
    // Padding 1, stride 2: the first row and column of windows see only one tap of the diagonal.
    let y = x.conv2d(&w, None, (2, 2), (1, 1), (1, 1), 1)?;
    assert_eq!(y.to_vec()?, vec![1.0, 3.0, 7.0, 14.0]);
    Ok(())
}

#[test]
fn conv2d_rejects_bad_shapes_with_readable_errors() -> Result<()> {
    let x = RawTensor::zeros(&[8, 3, 32, 32], &cpu())?;
    let w = RawTensor::zeros(&[16, 4, 3, 3], &cpu())?;
    let err = x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "conv2d: input [8, 3, 32, 32] weight [16, 4, 3, 3]: input has 3 channels but weight expects 4 (groups 1)"
    );
    assert!(matches!(err, Error::Shape { .. }));
    let w = RawTensor::zeros(&[16, 3, 3, 3], &cpu())?;
    let err = x.conv2d(&w, Some(&RawTensor::zeros(&[8], &cpu())?), (1, 1), (0, 0), (1, 1), 1).unwrap_err();
    assert!(err.to_string().contains("bias [8] must be [16]"), "{err}");
    let err = x.reshape(&[8, 3, 1024])?.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).unwrap_err();
    assert!(err.to_string().starts_with("conv2d: input [8, 3, 1024] weight [16, 3, 3, 3]"), "{err}");
    let small = RawTensor::zeros(&[1, 3, 2, 2], &cpu())?;
    let err = small.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    assert!(x.conv2d(&w, None, (0, 1), (0, 0), (1, 1), 1).is_err());
    let err = x.conv2d(&RawTensor::zeros(&[16, 1, 3, 3], &cpu())?, None, (1, 1), (0, 0), (1, 1), 2).unwrap_err();
    assert!(err.to_string().contains("divisible by groups 2"), "{err}");
    Ok(())
}

#[test]
fn im2col_gradient_is_col2im() -> Result<()> {
    let x = randn(&[2, 2, 4, 5], 80);
    let cols = x.im2col((2, 3), (1, 2), (1, 0), (1, 1))?;
    assert_eq!(cols.shape(), &[2, 12, 5 * 2]);
    grad_check(&[x], GradCheck::default(), |i| i[0].im2col((2, 3), (1, 2), (1, 0), (1, 1)))?;
    Ok(())
}

/// Direct-loop max or average pooling (average counts padding, like PyTorch's default).
fn naive_pool(
    x: &[f32],
    xs: [usize; 4],
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    d: (usize, usize),
    max: bool,
) -> Vec<f32> {
    let oh = (xs[2] + 2 * p.0 - d.0 * (k.0 - 1) - 1) / s.0 + 1;
    let ow = (xs[3] + 2 * p.1 - d.1 * (k.1 - 1) - 1) / s.1 + 1;
    let mut out = Vec::new();
    for n in 0..xs[0] {
        for c in 0..xs[1] {
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = if max { f32::NEG_INFINITY } else { 0.0 };
                    for ki in 0..k.0 {
                        for kj in 0..k.1 {
                            let ii = (i * s.0 + ki * d.0) as isize - p.0 as isize;
                            let jj = (j * s.1 + kj * d.1) as isize - p.1 as isize;
                            if ii < 0 || jj < 0 || ii >= xs[2] as isize || jj >= xs[3] as isize {
                                continue;
                            }
                            let v = x[at4(&xs, n, c, ii as usize, jj as usize)];
                            acc = if max { acc.max(v) } else { acc + v };
                        }
                    }
                    out.push(if max { acc } else { acc / (k.0 * k.1) as f32 });
                }
            }
        }
    }
    out
}

#[test]
fn max_pool2d_values_and_gradients() -> Result<()> {
    let x = t(&[1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 8.0, 1.0, 7.0, 6.0, 9.0, 2.0, 0.0, 1.0, 3.0, 4.0], &[1, 1, 4, 4]);
    assert_eq!(x.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))?.to_vec()?, vec![5.0, 8.0, 7.0, 9.0]);
    let cases = [((2, 2), (2, 2), (0, 0), (1, 1)), ((3, 3), (2, 1), (1, 1), (1, 1)), ((2, 3), (1, 2), (1, 1), (2, 1))];
    for (k, (kernel, stride, padding, dilation)) in cases.into_iter().enumerate() {
        let x = randn(&[2, 3, 6, 7], 90 + k as u64);
        let got = x.max_pool2d(kernel, stride, padding, dilation)?;
        let want = naive_pool(&x.to_vec()?, [2, 3, 6, 7], kernel, stride, padding, dilation, true);
        assert_close(&got.to_vec()?, &want, 0.0);
        let small = distinct(&[1, 2, 5, 5], 95 + k);
        grad_check(&[small], GradCheck::default(), |i| i[0].max_pool2d(kernel, stride, padding, dilation))?;
    }
    let xt = distinct(&[1, 2, 5, 4], 99);
    grad_check(&[xt], GradCheck::default(), |i| i[0].transpose(2, 3)?.max_pool2d((2, 2), (1, 1), (0, 0), (1, 1)))?;
    let err = x.max_pool2d((2, 2), (2, 2), (2, 2), (1, 1)).unwrap_err();
    assert!(err.to_string().contains("at most half the kernel"), "{err}");
    assert!(x.reshape(&[4, 4])?.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1)).is_err());
    Ok(())
}

#[test]
fn avg_pool2d_counts_padding_and_has_correct_gradients() -> Result<()> {
    let ones = RawTensor::ones(&[1, 1, 2, 2], &cpu())?;
    let y = ones.avg_pool2d((2, 2), (1, 1), (1, 1))?;
    assert_eq!(y.to_vec()?, vec![0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25]);
    for (k, (kernel, stride, padding)) in [((2, 2), (2, 2), (0, 0)), ((3, 2), (1, 2), (1, 1))].into_iter().enumerate() {
        let x = randn(&[2, 3, 6, 7], 100 + k as u64);
        let want = naive_pool(&x.to_vec()?, [2, 3, 6, 7], kernel, stride, padding, (1, 1), false);
        assert_close(&x.avg_pool2d(kernel, stride, padding)?.to_vec()?, &want, 1e-6);
        grad_check(&[randn(&[1, 2, 5, 4], 105 + k as u64)], GradCheck::default(), |i| {
            i[0].avg_pool2d(kernel, stride, padding)
        })?;
    }
    Ok(())
}

#[test]
fn adaptive_avg_pool2d_uses_pytorch_windows() -> Result<()> {
    // 5 → 3: windows [0,2), [1,4), [3,5) on each axis.
    let x = randn(&[2, 2, 5, 5], 110);
    let v = x.to_vec()?;
    let windows = [(0usize, 2usize), (1, 4), (3, 5)];
    let mut want = Vec::new();
    for nc in 0..4 {
        for &(h0, h1) in &windows {
            for &(w0, w1) in &windows {
                let mut sum = 0.0;
                for i in h0..h1 {
                    for j in w0..w1 {
                        sum += v[nc * 25 + i * 5 + j];
                    }
                }
                want.push(sum / ((h1 - h0) * (w1 - w0)) as f32);
            }
        }
    }
    let y = x.adaptive_avg_pool2d((3, 3))?;
    assert_eq!(y.shape(), &[2, 2, 3, 3]);
    assert_close(&y.to_vec()?, &want, 1e-6);
    // Global pooling is the spatial mean.
    assert_close(&x.adaptive_avg_pool2d((1, 1))?.to_vec()?, &x.mean(&[2, 3], false)?.to_vec()?, 1e-6);
    grad_check(&[randn(&[1, 2, 5, 4], 111)], GradCheck::default(), |i| i[0].adaptive_avg_pool2d((3, 2)))?;
    assert!(x.adaptive_avg_pool2d((0, 2)).is_err());
    Ok(())
}

#[test]
fn batch_norm_training_statistics_and_running_update() -> Result<()> {
    for device in [cpu()].into_iter().chain(wgpu_or_skip()) {
        batch_norm_statistics_on(&device).unwrap_or_else(|e| panic!("{device}: {e}"));
    }
    Ok(())
}

/// The statistics, the running update and evaluation of a hand-computed case on `device`.
fn batch_norm_statistics_on(device: &Device) -> Result<()> {
    let t = |data: &[f32], shape: &[usize]| RawTensor::from_slice(data, shape, device);
    // Channel 0: 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3); channel 1: all 2.
    let x = t(&[1.0, 2.0, 2.0, 2.0, 3.0, 2.0, 4.0, 2.0], &[4, 2])?;
    let running_mean = RawTensor::zeros(&[2], device)?;
    let running_var = RawTensor::ones(&[2], device)?;
    let eps = 1e-5;
    let stats = RunningStats { mean: &running_mean, var: &running_var, momentum: 0.1 };
    let y = x.batch_norm(None, None, Some(stats), true, eps)?;
    let s = (1.25f32 + eps).sqrt();
    assert_close(&y.to_vec()?, &[-1.5 / s, 0.0, -0.5 / s, 0.0, 0.5 / s, 0.0, 1.5 / s, 0.0], 1e-5);
    assert_close(&running_mean.to_vec()?, &[0.25, 0.2], 1e-6);
    assert_close(&running_var.to_vec()?, &[0.9 + 0.1 * 5.0 / 3.0, 0.9], 1e-6);
    // Eval: the running statistics are used and left alone.
    let w = t(&[2.0, 1.0], &[2])?;
    let b = t(&[0.5, -1.0], &[2])?;
    let stats = RunningStats { mean: &running_mean, var: &running_var, momentum: 0.1 };
    let y = x.batch_norm(Some(&w), Some(&b), Some(stats), false, eps)?.to_vec()?;
    let (m0, v0) = (0.25f32, 0.9f32 + 0.5 / 3.0);
    assert!((y[0] - (2.0 * (1.0 - m0) / (v0 + eps).sqrt() + 0.5)).abs() < 1e-5);
    assert!((y[1] - ((2.0 - 0.2) / (0.9f32 + eps).sqrt() - 1.0)).abs() < 1e-5);
    assert_close(&running_mean.to_vec()?, &[0.25, 0.2], 1e-6);
    let err = t(&[1.0, 2.0], &[1, 2])?.batch_norm(None, None, None, true, eps).unwrap_err();
    assert!(err.to_string().contains("more than 1 value per channel"), "{err}");
    assert!(x.batch_norm(Some(&t(&[1.0], &[1])?), None, None, true, eps).is_err());
    Ok(())
}

#[test]
fn batch_norm_gradients_in_training_and_eval() -> Result<()> {
    let x = randn(&[3, 2, 2, 3], 120);
    let w = randn(&[2], 121);
    let b = randn(&[2], 122);
    grad_check(&[x.clone(), w.clone(), b.clone()], GradCheck::default(), |i| {
        i[0].batch_norm(Some(&i[1]), Some(&i[2]), None, true, 1e-5)
    })?;
    let rm = randn(&[2], 123);
    let rv = randn(&[2], 124).abs()?.add_scalar(0.5)?;
    grad_check(&[x.clone(), w, b], GradCheck::default(), |i| {
        let stats = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
        i[0].batch_norm(Some(&i[1]), Some(&i[2]), Some(stats), false, 1e-5)
    })?;
    // [n, c, l] and a non-contiguous input.
    grad_check(&[randn(&[4, 3, 2], 125)], GradCheck::default(), |i| {
        i[0].transpose(0, 2)?.batch_norm(None, None, None, true, 1e-5)
    })?;
    Ok(())
}

#[test]
fn batch_norm_matches_pytorch_in_training_and_eval() -> Result<()> {
    for device in [cpu()].into_iter().chain(wgpu_or_skip()) {
        batch_norm_pytorch_case_on(&device).unwrap_or_else(|e| panic!("{device}: {e}"));
    }
    Ok(())
}

/// [`batch_norm_matches_pytorch_in_training_and_eval`]'s case on `device`.
fn batch_norm_pytorch_case_on(device: &Device) -> Result<()> {
    let t = |data: &[f32], shape: &[usize]| RawTensor::from_slice(data, shape, device);
    // bn = torch.nn.BatchNorm2d(3, eps=1e-5, momentum=0.1), weight [0.5, 1.5, -1], bias
    // [0.1, -0.2, 0.3], float64; x[i] = ((7i) % 11)·0.3 - 1.5 and p[i] = ((5i) % 7)·0.25 - 0.75,
    // both [2, 3, 2, 2]; y = bn(x); (y * p).sum().backward(); then bn.eval(); bn(x).
    let n = 24;
    let x =
        t(&(0..n).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.5).collect::<Vec<_>>(), &[2, 3, 2, 2])?.requires_grad_()?;
    let p = t(&(0..n).map(|i| ((i * 5) % 7) as f32 * 0.25 - 0.75).collect::<Vec<_>>(), &[2, 3, 2, 2])?;
    let w = t(&[0.5, 1.5, -1.0], &[3])?.requires_grad_()?;
    let b = t(&[0.1, -0.2, 0.3], &[3])?.requires_grad_()?;
    let (rm, rv) = (RawTensor::zeros(&[3], device)?, RawTensor::ones(&[3], device)?);
    let y = x.batch_norm(Some(&w), Some(&b), Some(RunningStats { mean: &rm, var: &rv, momentum: 0.1 }), true, 1e-5)?;
    let grads = y.mul(&p)?.sum_all()?.backward()?;
    let grad = |t: &RawTensor| grads.get(t).expect("a gradient").to_vec();
    #[rustfmt::skip]
    let y_torch = [-0.7693139, 0.2889813, -0.3157588, 0.7425363, 0.383652, -1.691555, 1.940057, -0.1351498,
        1.237037, -0.9493833, 0.3, 1.549383, 0.2889813, -0.3157588, 0.7425363, 0.1377963, -1.691555, 1.940057,
        -0.1351498, -2.210357, -0.9493833, 0.3, 1.549383, -0.6370375];
    #[rustfmt::skip]
    let dx_torch = [-0.2901315, 0.3095694, 0.07487246, -0.2073393, 1.303468, 0.03151989, -0.1204129, -1.392361,
        -0.2023613, -0.3483694, 0.5531124, -0.3674231, 0.1835819, -0.05111506, -0.3333268, 0.3138889, -0.4008149,
        -0.5527477, 1.201648, -0.07029967, -0.0880812, 0.8134006, -0.1071349, -0.253143];
    assert_close(&y.to_vec()?, &y_torch, 2e-5);
    assert_close(&grad(&x)?, &dx_torch, 2e-5);
    assert_close(&grad(&w)?, &[0.2267775, -1.361855, -2.342594], 2e-5);
    assert_close(&grad(&b)?, &[-1.0, 0.5, 0.25], 2e-5);
    assert_close(&rm.to_vec()?, &[0.0225, -0.00375, -0.03], 1e-6);
    assert_close(&rv.to_vec()?, &[1.0125, 0.9859821, 1.005429], 1e-6);
    let eval =
        x.batch_norm(Some(&w), Some(&b), Some(RunningStats { mean: &rm, var: &rv, momentum: 0.1 }), false, 1e-5)?;
    #[rustfmt::skip]
    let eval_torch = [-0.6565326, 0.3869606, -0.2093212, 0.834172, 0.2588501, -1.553891, 1.618406, -0.1943352,
        1.466831, -0.6274813, 0.5692688, 1.766019, 0.3869606, -0.2093212, 0.834172, 0.2378902, -1.553891,
        1.618406, -0.1943352, -2.007076, -0.6274813, 0.5692688, 1.766019, -0.3282938];
    assert_close(&eval.to_vec()?, &eval_torch, 2e-5);
    Ok(())
}

/// Forward values, the input, weight and bias gradients, and the running statistics of
/// `batch_norm` against `batch_norm_reference` (composed from ops, backward from autograd).
fn batch_norm_against_reference(shape: &[usize], affine: bool, training: bool, seed: u64) -> Result<()> {
    let c = shape[1];
    let run = |fused: bool| -> Result<Vec<Vec<f32>>> {
        let x = randn(shape, seed).mul_scalar(3.0)?.add_scalar(1.5)?.requires_grad_()?;
        let w = randn(&[c], seed + 1).requires_grad_()?;
        let b = randn(&[c], seed + 2).requires_grad_()?;
        let (rm, rv) = (randn(&[c], seed + 3), randn(&[c], seed + 4).abs()?.add_scalar(0.5)?);
        let stats = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
        let (wo, bo) = if affine { (Some(&w), Some(&b)) } else { (None, None) };
        let y = if fused {
            x.batch_norm(wo, bo, Some(stats), training, 1e-5)?
        } else {
            x.batch_norm_reference(wo, bo, Some(stats), training, 1e-5)?
        };
        // A weighted sum so that the gradient is not the trivially zero one of Σy.
        let probe = randn(shape, seed + 5);
        let grads = y.mul(&probe)?.sum_all()?.backward()?;
        let grad = |t: &RawTensor| grads.get(t).expect("a gradient").to_vec();
        let mut out = vec![y.to_vec()?, grad(&x)?, rm.to_vec()?, rv.to_vec()?];
        if affine {
            out.push(grad(&w)?);
            out.push(grad(&b)?);
        }
        Ok(out)
    };
    let (fused, reference) = (run(true)?, run(false)?);
    for (k, (f, r)) in fused.iter().zip(&reference).enumerate() {
        let scale = r.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let worst = f.iter().zip(r).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 2e-4 * scale, "{shape:?} affine {affine} training {training}: output {k} off by {worst}");
    }
    Ok(())
}

#[test]
fn batch_norm_fused_kernels_match_the_composed_reference() -> Result<()> {
    // [64, 8, 8, 8] crosses the CPU kernels' parallel threshold; the others run on one thread.
    for (shape, seed) in
        [(&[64usize, 8, 8, 8][..], 130u64), (&[5, 3, 4, 2][..], 140), (&[6, 4][..], 150), (&[3, 2, 7][..], 160)]
    {
        for affine in [true, false] {
            for training in [true, false] {
                batch_norm_against_reference(shape, affine, training, seed)?;
            }
        }
    }
    Ok(())
}

#[test]
fn layer_norm_values_and_gradients() -> Result<()> {
    let x = t(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 6.0], &[2, 4]);
    let y = x.layer_norm(&[4], None, None, 0.0)?.to_vec()?;
    let s0 = 1.25f32.sqrt();
    assert_close(&y[..4], &[-1.5 / s0, -0.5 / s0, 0.5 / s0, 1.5 / s0], 1e-5);
    // Row 2: mean 1.5, biased var (6.25 + 2.25 + 0.25 + 20.25) / 4 = 7.25.
    let s1 = 7.25f32.sqrt();
    assert_close(&y[4..], &[-2.5 / s1, -1.5 / s1, -0.5 / s1, 4.5 / s1], 1e-5);
    let x = randn(&[2, 3, 4], 130);
    let w = randn(&[3, 4], 131);
    let b = randn(&[3, 4], 132);
    grad_check(&[x.clone(), w, b], GradCheck::default(), |i| i[0].layer_norm(&[3, 4], Some(&i[1]), Some(&i[2]), 1e-5))?;
    let w1 = randn(&[4], 133);
    grad_check(&[x.clone(), w1], GradCheck::default(), |i| i[0].layer_norm(&[4], Some(&i[1]), None, 1e-5))?;
    grad_check(&[randn(&[4, 3], 134)], GradCheck::default(), |i| {
        i[0].transpose(0, 1)?.layer_norm(&[4], None, None, 1e-5)
    })?;
    let err = x.layer_norm(&[3], None, None, 1e-5).unwrap_err();
    assert!(err.to_string().contains("normalized shape [3]"), "{err}");
    Ok(())
}

#[test]
fn dropout_masks_scale_and_reproduce() -> Result<()> {
    let x = RawTensor::ones(&[100, 100], &cpu())?;
    assert_eq!(x.dropout(0.3, false, 1)?.to_vec()?, x.to_vec()?);
    assert_eq!(x.dropout(0.0, true, 1)?.to_vec()?, x.to_vec()?);
    let y = x.dropout(0.3, true, 7)?.to_vec()?;
    let kept = y.iter().filter(|&&v| v != 0.0).count();
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.7).abs() < 1e-6));
    assert!((kept as f32 / 10_000.0 - 0.7).abs() < 0.02, "kept {kept}");
    assert_eq!(x.dropout(0.3, true, 7)?.to_vec()?, y, "same seed, same mask");
    assert_ne!(x.dropout(0.3, true, 8)?.to_vec()?, y, "new seed, new mask");
    assert!(x.dropout(1.0, true, 7)?.to_vec()?.iter().all(|&v| v == 0.0));
    assert!(x.dropout(1.5, true, 7).is_err());
    // The gradient is the (fixed-seed) mask.
    grad_check(&[randn(&[4, 5], 140)], GradCheck::default(), |i| i[0].dropout(0.5, true, 3))?;
    Ok(())
}

#[test]
fn index_select_and_embedding() -> Result<()> {
    let x = t(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
    let rows = x.index_select(0, &idx(&[2, 0, 2], &[3]))?;
    assert_eq!(rows.to_vec()?, vec![4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
    let cols = x.index_select(1, &idx(&[1], &[1]))?;
    assert_eq!(cols.to_vec()?, vec![1.0, 3.0, 5.0]);
    // Repeated indices accumulate their gradients.
    grad_check(&[randn(&[4, 3], 150)], GradCheck::default(), |i| i[0].index_select(0, &idx(&[3, 1, 3, 3], &[4])))?;
    grad_check(&[randn(&[2, 4, 3], 151)], GradCheck::default(), |i| {
        i[0].transpose(0, 1)?.index_select(1, &idx(&[1, 0, 1], &[3]))
    })?;
    let err = x.index_select(0, &idx(&[0, 3], &[2])).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { op: "index_select", index: 3, limit: 3, position: 1 }), "{err}");
    // A leading slice of a longer index tensor reads only its own indices.
    let long = idx(&[1, 2, 0, 0, 0], &[5]).narrow(0, 0, 2)?;
    assert_eq!(x.index_select(0, &long)?.to_vec()?, vec![2.0, 3.0, 4.0, 5.0]);

    let weight = t(&[0.0, 0.1, 1.0, 1.1, 2.0, 2.1], &[3, 2]);
    let tokens = idx(&[2, 1, 0, 2], &[2, 2]);
    let e = tokens.embedding(&weight)?;
    assert_eq!(e.shape(), &[2, 2, 2]);
    assert_eq!(e.to_vec()?, vec![2.0, 2.1, 1.0, 1.1, 0.0, 0.1, 2.0, 2.1]);
    grad_check(std::slice::from_ref(&weight), GradCheck::default(), |i| tokens.embedding(&i[0]))?;
    let err = idx(&[0, 5], &[1, 2]).embedding(&weight).unwrap_err();
    assert_eq!(err.to_string(), "embedding: index 5 out of range for size 3 (at position 1)");
    assert!(matches!(t(&[0.0], &[1]).embedding(&weight), Err(Error::DType { .. })));
    Ok(())
}

#[test]
fn gather_values_and_scatter_add_gradient() -> Result<()> {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(x.gather(1, &idx(&[2, 0, 1, 1], &[2, 2]))?.to_vec()?, vec![3.0, 1.0, 5.0, 5.0]);
    assert_eq!(x.gather(0, &idx(&[1, 0, 1], &[1, 3]))?.to_vec()?, vec![4.0, 2.0, 6.0]);
    // Indices shorter than the input on a non-gathered axis read the leading part.
    assert_eq!(x.gather(1, &idx(&[1], &[1, 1]))?.to_vec()?, vec![2.0]);
    let g = idx(&[0, 0, 2, 1, 2, 2, 0, 1, 1, 1, 1, 0], &[2, 2, 3]);
    grad_check(&[randn(&[2, 3, 3], 160)], GradCheck::default(), |i| i[0].gather(1, &g))?;
    grad_check(&[randn(&[3, 2, 3], 161)], GradCheck::default(), |i| i[0].transpose(0, 1)?.gather(1, &g))?;
    let err = x.gather(1, &idx(&[0, 3], &[2, 1])).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { op: "gather", index: 3, limit: 3, position: 1 }), "{err}");
    assert!(x.gather(1, &idx(&[0, 1, 2], &[3, 1])).is_err());
    assert!(x.gather(1, &idx(&[0, 1], &[2])).is_err());
    Ok(())
}

#[test]
fn concat_and_stack_values_and_gradients() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[5.0, 6.0], &[2, 1]);
    let c = RawTensor::concat(&[&a, &b], 1)?;
    assert_eq!(c.shape(), &[2, 3]);
    assert_eq!(c.to_vec()?, vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    let c0 = RawTensor::concat(&[&a, &a.transpose(0, 1)?], 0)?;
    assert_eq!(c0.to_vec()?, vec![1.0, 2.0, 3.0, 4.0, 1.0, 3.0, 2.0, 4.0]);
    let s = RawTensor::stack(&[&a, &a.mul_scalar(10.0)?], 1)?;
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(s.to_vec()?, vec![1.0, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0]);
    assert_eq!(RawTensor::stack(&[&a, &a], -1)?.shape(), &[2, 2, 2]);
    let ints = RawTensor::concat(&[&idx(&[1, 2], &[2]), &idx(&[3], &[1])], 0)?;
    assert_eq!(ints.to_vec_u32()?, vec![1, 2, 3]);

    let (x, y, z) = (randn(&[2, 3, 2], 170), randn(&[2, 1, 2], 171), randn(&[2, 2, 3], 172));
    grad_check(&[x.clone(), y.clone(), z.clone()], GradCheck::default(), |i| {
        RawTensor::concat(&[&i[0], &i[1], &i[2].transpose(1, 2)?], 1)
    })?;
    grad_check(&[x.clone(), x.clone()], GradCheck::default(), |i| {
        RawTensor::stack(&[&i[0], &i[1].transpose(0, 2)?.transpose(0, 2)?.sigmoid()?], 2)
    })?;
    // One tensor used twice collects both gradients.
    grad_check(std::slice::from_ref(&y), GradCheck::default(), |i| RawTensor::concat(&[&i[0], &i[0].exp()?], 0))?;
    let err = RawTensor::concat(&[&x, &z], 1).unwrap_err();
    assert_eq!(err.to_string(), "concat: shapes [[2, 3, 2], [2, 2, 3]] differ outside axis 1");
    assert!(RawTensor::stack(&[&x, &y], 0).is_err());
    assert!(RawTensor::concat(&[], 0).is_err());
    Ok(())
}

/// Reference cross-entropy in f64: `-Σ q log_softmax(x)` averaged over rows.
fn naive_cross_entropy(logits: &[f32], targets: &[u32], classes: usize, smoothing: f64) -> f64 {
    let rows = targets.len();
    let mut total = 0.0;
    for (r, &target) in targets.iter().enumerate() {
        let row: Vec<f64> = logits[r * classes..(r + 1) * classes].iter().map(|&v| v as f64).collect();
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        for (j, v) in row.iter().enumerate() {
            let q = smoothing / classes as f64 + if j == target as usize { 1.0 - smoothing } else { 0.0 };
            total -= q * (v - lse);
        }
    }
    total / rows as f64
}

#[test]
fn cross_entropy_is_stable_on_every_row_length() -> Result<()> {
    for classes in [1usize, 63, 64, 65, 1000] {
        let rows = 4;
        let targets: Vec<u32> = (0..rows as u32).map(|r| (r * 37) % classes as u32).collect();
        let logits = randn(&[rows, classes], classes as u64);
        for smoothing in [0.0, 0.1] {
            let loss = logits.cross_entropy(&idx(&targets, &[rows]), smoothing)?.item()?;
            let want = naive_cross_entropy(&logits.to_vec()?, &targets, classes, smoothing as f64);
            assert!((loss as f64 - want).abs() < 1e-4 * want.abs().max(1.0), "classes {classes}: {loss} vs {want}");
        }
        // Logits of ±1e4: finite loss and gradient, matching the f64 reference.
        let huge = randn(&[rows, classes], 7 + classes as u64).mul_scalar(1e4)?.requires_grad_()?;
        let loss = huge.cross_entropy(&idx(&targets, &[rows]), 0.1)?;
        let value = loss.item()?;
        let want = naive_cross_entropy(&huge.to_vec()?, &targets, classes, 0.1);
        assert!(value.is_finite() && (value as f64 - want).abs() < 1e-3 * want.abs().max(1.0), "{value} vs {want}");
        let grads = loss.backward()?;
        assert!(grads.get(&huge).unwrap().to_vec()?.iter().all(|g| g.is_finite()));
        let log_probs = huge.log_softmax(-1)?.to_vec()?;
        assert!(log_probs.iter().all(|v| v.is_finite()), "log_softmax at {classes} classes");
    }
    Ok(())
}

#[test]
fn cross_entropy_label_smoothing_value_and_gradients() -> Result<()> {
    // PyTorch: F.cross_entropy(tensor([[1., 2., 3.]]), tensor([0]), label_smoothing=0.3) = 2.1076.
    let logits = t(&[1.0, 2.0, 3.0], &[1, 3]);
    let loss = logits.cross_entropy(&idx(&[0], &[1]), 0.3)?.item()?;
    assert!((loss - 2.107_606).abs() < 1e-5, "{loss}");
    assert!((logits.cross_entropy(&idx(&[2], &[1]), 0.0)?.item()? - 0.407_606).abs() < 1e-5);
    let targets = idx(&[1, 0, 4], &[3]);
    for smoothing in [0.0, 0.2] {
        grad_check(&[randn(&[3, 5], 180)], GradCheck::default(), |i| i[0].cross_entropy(&targets, smoothing))?;
    }
    grad_check(&[randn(&[5, 3], 181)], GradCheck::default(), |i| i[0].transpose(0, 1)?.cross_entropy(&targets, 0.1))?;
    grad_check(&[randn(&[1, 5], 182)], GradCheck::default(), |i| {
        i[0].broadcast_to(&[3, 5])?.cross_entropy(&targets, 0.0)
    })?;
    let err = randn(&[3, 5], 1).cross_entropy(&idx(&[1, 5, 0], &[3]), 0.0).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { op: "cross_entropy", index: 5, limit: 5, position: 1 }));
    let err = randn(&[3, 5], 1).cross_entropy(&idx(&[1, 0], &[2]), 0.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cross_entropy: input [3, 5] targets [2]: expected input [batch, classes] and targets [batch]"
    );
    assert!(randn(&[3, 5], 1).cross_entropy(&targets, 1.0).is_err());
    Ok(())
}

#[test]
fn nll_mse_and_bce_losses() -> Result<()> {
    let targets = idx(&[1, 0, 4], &[3]);
    let logits = randn(&[3, 5], 190);
    let nll = logits.log_softmax(-1)?.nll_loss(&targets)?.item()?;
    assert!((nll - logits.cross_entropy(&targets, 0.0)?.item()?).abs() < 1e-5);
    grad_check(&[randn(&[3, 5], 191)], GradCheck::default(), |i| i[0].log_softmax(-1)?.nll_loss(&targets))?;
    assert!(matches!(logits.nll_loss(&idx(&[1, 9, 0], &[3])), Err(Error::IndexOutOfRange { op: "nll_loss", .. })));

    let pred = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let target = t(&[0.0, 2.0, 5.0, 4.5], &[2, 2]);
    assert!((pred.mse_loss(&target)?.item()? - (1.0 + 0.0 + 4.0 + 0.25) / 4.0).abs() < 1e-6);
    grad_check(&[randn(&[2, 3], 192), randn(&[2, 3], 193)], GradCheck::default(), |i| i[0].mse_loss(&i[1]))?;
    let err = pred.mse_loss(&t(&[1.0, 2.0], &[2])).unwrap_err();
    assert_eq!(err.to_string(), "mse_loss: input [2, 2] target [2]: shapes must be equal");

    let x = t(&[-2.0, 0.0, 0.5, 100.0, -100.0, 3.0], &[2, 3]);
    let y = t(&[0.0, 1.0, 0.3, 1.0, 0.0, 0.0], &[2, 3]);
    let (xv, yv) = (x.to_vec()?, y.to_vec()?);
    let want: f64 = xv
        .iter()
        .zip(&yv)
        .map(|(&x, &t)| {
            let (x, t) = (x as f64, t as f64);
            // -[t·log σ(x) + (1-t)·log(1-σ(x))] with log σ(x) = -log(1 + e^{-x}).
            t * (-x).exp().ln_1p() + (1.0 - t) * x.exp().ln_1p()
        })
        .sum::<f64>()
        / 6.0;
    let loss = x.bce_with_logits(&y)?.item()?;
    assert!((loss as f64 - want).abs() < 1e-5, "{loss} vs {want}");
    // At x = 0 the gradient is sigmoid(0) - t = 0.5 - t (divided by the element count).
    let xl = x.requires_grad_()?;
    let grads = xl.bce_with_logits(&y)?.backward()?;
    let gx = grads.get(&xl).unwrap().to_vec()?;
    assert!((gx[1] - (0.5 - 1.0) / 6.0).abs() < 1e-7);
    assert!(gx.iter().all(|g| g.is_finite()));
    let targets01 = RawTensor::rand_uniform(&[2, 3], 0.0, 1.0, 194, &cpu())?;
    grad_check(&[randn(&[2, 3], 195), targets01], GradCheck::default(), |i| i[0].bce_with_logits(&i[1]))?;
    // The free functions are the same ops.
    assert_eq!(rumus::loss::mse_loss(&pred, &target)?.item()?, pred.mse_loss(&target)?.item()?);
    assert_eq!(
        rumus::loss::cross_entropy(&logits, &targets, 0.1)?.item()?,
        logits.cross_entropy(&targets, 0.1)?.item()?
    );
    assert_eq!(rumus::loss::bce_with_logits(&x, &y)?.item()?, loss);
    assert_eq!(rumus::loss::nll_loss(&logits, &targets)?.item()?, logits.nll_loss(&targets)?.item()?);
    Ok(())
}

#[test]
fn malformed_inputs_give_errors_not_panics() -> Result<()> {
    let shapes: [&[usize]; 8] = [&[], &[0], &[3], &[2, 3], &[2, 3, 4], &[1, 2, 3, 4], &[0, 2, 3, 4], &[1, 1, 2, 3, 4]];
    let tensors: Vec<RawTensor> = shapes.iter().map(|s| RawTensor::ones(s, &cpu()).unwrap()).collect();
    let indices: Vec<RawTensor> =
        shapes.iter().map(|s| RawTensor::from_indices(&vec![1; s.iter().product()], s, &cpu()).unwrap()).collect();
    let mut failures = 0;
    let mut count = |r: Result<RawTensor>| failures += r.is_err() as usize;
    for x in &tensors {
        for w in &tensors {
            count(x.conv2d(w, None, (1, 1), (0, 0), (1, 1), 1));
            count(x.conv2d(w, Some(w), (1, 1), (1, 1), (1, 1), 3));
            count(RawTensor::concat(&[x, w], 0));
            count(RawTensor::concat(&[x, w], -1));
            count(RawTensor::stack(&[x, w], 1));
            count(x.mse_loss(w));
            count(x.bce_with_logits(w));
            count(x.layer_norm(w.shape(), Some(w), None, 1e-5));
            count(x.batch_norm(Some(w), Some(w), None, true, 1e-5));
        }
        for i in &indices {
            count(x.index_select(0, i));
            count(x.index_select(-1, i));
            count(x.gather(0, i));
            count(x.gather(-1, i));
            count(x.cross_entropy(i, 0.1));
            count(x.nll_loss(i));
            count(i.embedding(x));
            count(x.embedding(x));
        }
        count(x.max_pool2d((2, 2), (1, 1), (0, 0), (1, 1)));
        count(x.max_pool2d((0, 2), (1, 1), (0, 0), (1, 1)));
        count(x.avg_pool2d((2, 2), (2, 2), (1, 1)));
        count(x.adaptive_avg_pool2d((2, 2)));
        count(x.im2col((5, 5), (1, 1), (0, 0), (1, 1)));
        count(x.dropout(0.5, true, 1));
        count(x.dropout(f32::NAN, true, 1));
        count(x.cross_entropy(x, 0.0));
    }
    assert!(failures > 0);
    Ok(())
}

#[test]
fn broadcast_and_strided_inputs_through_every_remaining_op() -> Result<()> {
    let check = GradCheck::default();
    // Pooling of a transposed input and of a batch broadcast from one sample.
    grad_check(&[randn(&[1, 2, 5, 4], 200)], check, |i| i[0].transpose(2, 3)?.avg_pool2d((2, 2), (1, 2), (1, 0)))?;
    grad_check(&[randn(&[1, 2, 5, 4], 201)], check, |i| i[0].broadcast_to(&[3, 2, 5, 4])?.adaptive_avg_pool2d((2, 3)))?;
    grad_check(&[distinct(&[1, 2, 4, 5], 202)], check, |i| {
        i[0].broadcast_to(&[2, 2, 4, 5])?.max_pool2d((2, 2), (2, 2), (1, 1), (1, 1))
    })?;
    // Normalisation with a broadcast input and parameters taken from a strided view.
    let wide = randn(&[4, 2], 203);
    grad_check(&[randn(&[1, 3, 4], 204), wide.clone()], check, |i| {
        i[0].broadcast_to(&[2, 3, 4])?.layer_norm(
            &[4],
            Some(&i[1].transpose(0, 1)?.narrow(0, 1, 2)?.reshape(&[4])?),
            None,
            1e-5,
        )
    })?;
    grad_check(&[randn(&[3, 1, 2], 205), wide], check, |i| {
        let w = i[1].narrow(1, 0, 1)?.reshape(&[4])?;
        i[0].broadcast_to(&[3, 4, 2])?.batch_norm(Some(&w), None, None, true, 1e-5)
    })?;
    // Dropout and the elementwise losses on strided and broadcast operands.
    grad_check(&[randn(&[3, 4], 206)], check, |i| i[0].transpose(0, 1)?.dropout(0.25, true, 9))?;
    grad_check(&[randn(&[3, 4], 207), randn(&[4], 208)], check, |i| {
        i[0].transpose(0, 1)?.mse_loss(&i[1].reshape(&[4, 1])?.broadcast_to(&[4, 3])?)
    })?;
    let probabilities = RawTensor::rand_uniform(&[3, 4], 0.0, 1.0, 209, &cpu())?;
    grad_check(&[randn(&[1, 3], 210), probabilities], check, |i| {
        i[0].broadcast_to(&[4, 3])?.bce_with_logits(&i[1].transpose(0, 1)?)
    })?;
    // Cross-entropy gradients at the awkward row lengths.
    for classes in [1usize, 63, 64, 65] {
        let targets: Vec<u32> = (0..2).map(|r| (r * 29) % classes as u32).collect();
        let targets = idx(&targets, &[2]);
        grad_check(&[randn(&[2, classes], 211 + classes as u64)], check, |i| i[0].cross_entropy(&targets, 0.1))?;
    }
    Ok(())
}
