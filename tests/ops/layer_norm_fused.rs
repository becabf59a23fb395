//! The fused layer norm (`RawTensor::layer_norm`, kernels `Backend::layer_norm` /
//! `layer_norm_backward` / `layer_norm_param_grads`) against the composed `layer_norm_reference`: values and gradients
//! of input, weight and bias on CPU and wgpu, with and without weight and bias, over one or two
//! trailing axes of sizes that are not multiples of the workgroup, finite differences, CPU ↔
//! wgpu parity, strided input and bad input.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::LayerNormArgs;
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, RawTensor, Result};

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

/// Input shape, normalised shape, weight, bias.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    normalized: Vec<usize>,
    weight: bool,
    bias: bool,
}

fn case(shape: &[usize], trailing: usize, weight: bool, bias: bool) -> Case {
    Case { shape: shape.to_vec(), normalized: shape[shape.len() - trailing..].to_vec(), weight, bias }
}

/// Output and the gradients of x, weight, bias (those present) of a weighted sum of the output.
fn run(device: &Device, c: &Case, fused: bool) -> Result<(Vec<f32>, Vec<Vec<f32>>)> {
    let n: usize = c.shape.iter().product();
    let f: usize = c.normalized.iter().product();
    let x = RawTensor::from_vec(data(n, 1), &c.shape, device)?.requires_grad_()?;
    let w = RawTensor::from_vec(data(f, 2), &c.normalized, device)?.requires_grad_()?;
    let b = RawTensor::from_vec(data(f, 3), &c.normalized, device)?.requires_grad_()?;
    let (wo, bo) = (c.weight.then_some(&w), c.bias.then_some(&b));
    let out = if fused {
        x.layer_norm(&c.normalized, wo, bo, 1e-5)?
    } else {
        x.layer_norm_reference(&c.normalized, wo, bo, 1e-5)?
    };
    let weights = RawTensor::rand_uniform(out.shape(), 0.5, 1.5, 99, device)?;
    let grads = out.mul(&weights)?.sum_all()?.backward()?;
    let leaves = [Some(&x), wo, bo];
    let grads =
        leaves.into_iter().flatten().map(|l| grads.get(l).expect("a gradient").to_vec()).collect::<Result<_>>()?;
    Ok((out.to_vec()?, grads))
}

fn cases() -> Vec<Case> {
    vec![
        case(&[3, 5], 1, true, true),
        case(&[2, 3, 37], 1, true, false),
        case(&[4, 70], 1, false, true),
        case(&[2, 130], 1, false, false),
        case(&[2, 3, 4], 2, true, true),
        case(&[1, 1], 1, true, true),
        // Rows enough that the parameter gradients sum several chunks of rows, and chunks that
        // end off a multiple of 4 rows.
        case(&[300, 7], 1, true, true),
        case(&[1003, 70], 1, true, false),
    ]
}

fn check_against_reference(device: &Device) {
    for c in cases() {
        let (out, grads) = run(device, &c, true).unwrap();
        let (want, want_grads) = run(device, &c, false).unwrap();
        assert_close(&format!("{c:?} output"), &out, &want, 1e-4);
        assert_eq!(grads.len(), want_grads.len());
        for (i, (g, w)) in grads.iter().zip(&want_grads).enumerate() {
            assert_close(&format!("{c:?} gradient {i}"), g, w, 1e-4);
        }
    }
}

#[test]
fn fused_matches_the_reference_on_cpu() {
    check_against_reference(&Device::cpu());
}

#[test]
fn fused_matches_the_reference_on_wgpu() {
    let Some(device) = wgpu_or_skip() else { return };
    check_against_reference(&device);
}

#[test]
fn cpu_and_wgpu_agree() {
    let Some(device) = wgpu_or_skip() else { return };
    for c in cases() {
        let (out, grads) = run(&Device::cpu(), &c, true).unwrap();
        let (gpu_out, gpu_grads) = run(&device, &c, true).unwrap();
        assert_close(&format!("{c:?} output"), &gpu_out, &out, 1e-4);
        for (i, (g, w)) in gpu_grads.iter().zip(&grads).enumerate() {
            assert_close(&format!("{c:?} gradient {i}"), g, w, 1e-4);
        }
    }
}

/// Normalised rows have mean 0 and biased variance 1 (checked on the host).
#[test]
fn rows_come_out_normalised() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let x = RawTensor::from_vec(data(3 * 37, 4), &[3, 37], &device).unwrap();
        let y = x.layer_norm(&[37], None, None, 0.0).unwrap().to_vec().unwrap();
        for row in y.chunks(37) {
            let mean = row.iter().sum::<f32>() / 37.0;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 37.0;
            assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4, "{device}: mean {mean}, var {var}");
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let x = RawTensor::from_vec(data(2 * 5, 5), &[2, 5], &device).unwrap();
        let w = RawTensor::from_vec(data(5, 6), &[5], &device).unwrap();
        let b = RawTensor::from_vec(data(5, 7), &[5], &device).unwrap();
        let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
        grad_check(&[x, w, b], settings, |t| t[0].layer_norm(&[5], Some(&t[1]), Some(&t[2]), 1e-5))
            .unwrap_or_else(|e| panic!("{device}: {e}"));
    }
}

/// A transposed (strided) input normalises the same as its contiguous copy.
#[test]
fn strided_input_matches_its_contiguous_copy() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let x = RawTensor::from_vec(data(6 * 4, 8), &[6, 4], &device).unwrap().transpose(0, 1).unwrap();
        let got = x.layer_norm(&[6], None, None, 1e-5).unwrap().to_vec().unwrap();
        let want = x.contiguous().unwrap().layer_norm_reference(&[6], None, None, 1e-5).unwrap().to_vec().unwrap();
        assert_close("strided", &got, &want, 1e-5);
    }
}

#[test]
fn bad_input_is_an_error() {
    let device = Device::cpu();
    let x = RawTensor::zeros(&[2, 3], &device).unwrap();
    let shape_error = |r: Result<RawTensor>| matches!(r, Err(rumus::Error::Shape { .. }));
    assert!(shape_error(x.layer_norm(&[2], None, None, 1e-5)), "leading axis as normalised shape");
    assert!(shape_error(x.layer_norm(&[], None, None, 1e-5)));
    assert!(shape_error(x.layer_norm(&[3], Some(&RawTensor::zeros(&[4], &device).unwrap()), None, 1e-5)));
    assert!(x.layer_norm(&[3], None, None, -1.0).is_err());
    assert!(x.layer_norm(&[3], None, None, f32::NAN).is_err());
    let ok = LayerNormArgs { rows: 2, cols: 3, eps: 1e-5 };
    assert!(ok.check("layer_norm").is_ok());
    assert!(LayerNormArgs { cols: 0, ..ok }.check("layer_norm").is_err());
    assert!(LayerNormArgs { rows: usize::MAX, ..ok }.check("layer_norm").is_err());
    let b = device.backend();
    let short = b.from_f32(&[0.0; 4]).unwrap();
    assert!(b.layer_norm(&short, None, None, &ok).is_err(), "a buffer shorter than [rows, cols]");
    // The parameter gradients' kernel refuses a short x, dy, mean or rstd on every backend.
    let mut devices = vec![device];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let b = device.backend();
        let (full, row) = (b.from_f32(&[0.5; 6]).unwrap(), b.from_f32(&[0.5; 2]).unwrap());
        let (short, one) = (b.from_f32(&[0.5; 5]).unwrap(), b.from_f32(&[0.5; 1]).unwrap());
        assert!(b.layer_norm_param_grads(&full, &row, &row, &full, &ok).is_ok(), "{device}");
        assert!(b.layer_norm_param_grads(&short, &row, &row, &full, &ok).is_err(), "{device}: short x");
        assert!(b.layer_norm_param_grads(&full, &row, &row, &short, &ok).is_err(), "{device}: short dy");
        assert!(b.layer_norm_param_grads(&full, &one, &row, &full, &ok).is_err(), "{device}: short mean");
        assert!(b.layer_norm_param_grads(&full, &row, &one, &full, &ok).is_err(), "{device}: short rstd");
    }
}
