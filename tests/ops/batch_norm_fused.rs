//! The fused batch norm on wgpu (`RawTensor::batch_norm` through `Backend::batch_norm`,
//! `batch_norm_backward` and `batch_norm_update_running`): CPU ↔ wgpu parity of values, the
//! gradients of input, weight and bias, and the running statistics, in training and evaluation,
//! with and without weight and bias, over shapes whose channels are not a multiple of the
//! workgroup, whose `inner` is or is not a multiple of 4 (the four-wide elementwise kernels),
//! and large enough that a channel's sums are split over several and the most workgroups;
//! the composed reference on wgpu, a large mean against a small spread, one value per
//! channel, strided input, and finite differences through the wgpu backward.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::BatchNormArgs;
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, RawTensor, Result, RunningStats};

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

/// One batch norm call: the input's shape, its values' offset (`x = offset + data`), weight
/// and bias or neither, training or evaluation.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    offset: f32,
    affine: bool,
    training: bool,
}

/// Output, the gradients of x (and of weight and bias with `affine`) of a weighted sum of the
/// output, and the running mean and variance after the call.
fn run(device: &Device, c: &Case, fused: bool) -> Result<Vec<Vec<f32>>> {
    let n: usize = c.shape.iter().product();
    let ch = c.shape[1];
    let x = RawTensor::from_vec(data(n, 1), &c.shape, device)?.add_scalar(c.offset)?.detach().requires_grad_()?;
    let w = RawTensor::from_vec(data(ch, 2), &[ch], device)?.requires_grad_()?;
    let b = RawTensor::from_vec(data(ch, 3), &[ch], device)?.requires_grad_()?;
    let rm = RawTensor::from_vec(data(ch, 4), &[ch], device)?;
    let rv = RawTensor::from_vec(data(ch, 5).iter().map(|v| v.abs() + 0.5).collect(), &[ch], device)?;
    let stats = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
    let (wo, bo) = if c.affine { (Some(&w), Some(&b)) } else { (None, None) };
    let out = if fused {
        x.batch_norm(wo, bo, Some(stats), c.training, 1e-5)?
    } else {
        x.batch_norm_reference(wo, bo, Some(stats), c.training, 1e-5)?
    };
    let weights = RawTensor::rand_uniform(out.shape(), 0.5, 1.5, 99, device)?;
    let grads = out.mul(&weights)?.sum_all()?.backward()?;
    let mut result = vec![out.to_vec()?];
    for leaf in [Some(&x), wo, bo].into_iter().flatten() {
        result.push(grads.get(leaf).expect("a gradient").to_vec()?);
    }
    result.push(rm.to_vec()?);
    result.push(rv.to_vec()?);
    Ok(result)
}

fn cases() -> Vec<Case> {
    let shapes: [&[usize]; 8] = [
        &[4, 3, 5, 5],   // inner 25: one value per invocation
        &[2, 65, 4, 4],  // 65 channels (one past the workgroup), inner 16: four per invocation
        &[8, 5],         // BatchNorm1d: inner 1
        &[3, 2, 7],      // [N, C, L]
        &[2, 3],         // two values per channel
        &[16, 4, 8, 8],  // 1,024 values per channel: two workgroups each
        &[4, 2, 96, 96], // 36,864 per channel: the most workgroups (64)
        &[1, 130, 3, 1], // three values per channel, channels past two workgroups
    ];
    let mut cases = Vec::new();
    for shape in shapes {
        for affine in [true, false] {
            for training in [true, false] {
                cases.push(Case { shape: shape.to_vec(), offset: 0.0, affine, training });
            }
        }
    }
    cases
}

fn compare(what: &str, got: &[Vec<f32>], want: &[Vec<f32>], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_close(&format!("{what} result {k}"), g, w, tol);
    }
}

#[test]
fn wgpu_matches_the_cpu() {
    let Some(device) = wgpu_or_skip() else { return };
    for c in cases() {
        let cpu = run(&Device::cpu(), &c, true).unwrap();
        let gpu = run(&device, &c, true).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        // The weight and bias gradients are sums over `count` values in f32 (the CPU adds runs
        // in f64): their rounding grows with the count.
        let count = c.shape.iter().product::<usize>() / c.shape[1];
        compare(&format!("{c:?}"), &gpu, &cpu, 1e-4 * (count as f32 / 4096.0).max(1.0));
    }
}

#[test]
fn wgpu_matches_the_composed_reference() {
    let Some(device) = wgpu_or_skip() else { return };
    for c in cases().into_iter().filter(|c| c.shape.iter().product::<usize>() < 10_000) {
        let fused = run(&device, &c, true).unwrap();
        let reference = run(&device, &c, false).unwrap();
        compare(&format!("{c:?}"), &fused, &reference, 1e-4);
    }
}

/// A mean far from zero against a unit spread: the shifted sums keep the variance. Compared
/// with the CPU's fused kernels (sums in f64 across runs), not the composed reference, whose
/// f32 mean of the offset values is off by ~1e-4 and so the weight gradient by Σdy times that.
#[test]
fn a_large_mean_keeps_the_variance() {
    let Some(device) = wgpu_or_skip() else { return };
    for training in [true, false] {
        let c = Case { shape: vec![8, 3, 16, 16], offset: 1000.0, affine: true, training };
        compare(&format!("{c:?}"), &run(&device, &c, true).unwrap(), &run(&Device::cpu(), &c, true).unwrap(), 1e-3);
    }
}

/// Normalised channels have mean 0 and biased variance 1 (checked on the host).
#[test]
fn channels_come_out_normalised() {
    let Some(device) = wgpu_or_skip() else { return };
    let (n, ch, inner) = (6, 5, 12);
    let x = RawTensor::from_vec(data(n * ch * inner, 6), &[n, ch, inner], &device).unwrap();
    let y = x.batch_norm(None, None, None, true, 0.0).unwrap().to_vec().unwrap();
    for c in 0..ch {
        let values: Vec<f32> =
            (0..n).flat_map(|s| y[(s * ch + c) * inner..(s * ch + c + 1) * inner].to_vec()).collect();
        let mean = values.iter().sum::<f32>() / values.len() as f32;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / values.len() as f32;
        assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4, "channel {c}: mean {mean}, var {var}");
    }
}

/// One value per channel: an error when training, as on the CPU; evaluation normalises it.
#[test]
fn one_value_per_channel() {
    let Some(device) = wgpu_or_skip() else { return };
    for d in [Device::cpu(), device.clone()] {
        let x = RawTensor::from_vec(vec![1.0, 2.0, 3.0], &[1, 3, 1, 1], &d).unwrap();
        let err = x.batch_norm(None, None, None, true, 1e-5).unwrap_err();
        assert!(matches!(err, rumus::Error::Shape { .. }), "{d}: {err}");
    }
    let c = Case { shape: vec![1, 3, 1, 1], offset: 0.0, affine: true, training: false };
    compare("one value, evaluation", &run(&device, &c, true).unwrap(), &run(&Device::cpu(), &c, true).unwrap(), 1e-5);
}

/// A transposed (strided) input normalises the same as its contiguous copy.
#[test]
fn strided_input_matches_its_contiguous_copy() {
    let Some(device) = wgpu_or_skip() else { return };
    let x = RawTensor::from_vec(data(4 * 3 * 6, 7), &[6, 3, 4], &device).unwrap().transpose(0, 2).unwrap();
    let got = x.batch_norm(None, None, None, true, 1e-5).unwrap().to_vec().unwrap();
    let want = x.contiguous().unwrap().batch_norm(None, None, None, true, 1e-5).unwrap().to_vec().unwrap();
    assert_close("strided", &got, &want, 1e-5);
}

#[test]
fn gradients_match_finite_differences_on_wgpu() {
    let Some(device) = wgpu_or_skip() else { return };
    let x = RawTensor::from_vec(data(3 * 2 * 5, 8), &[3, 2, 5], &device).unwrap();
    let w = RawTensor::from_vec(data(2, 9), &[2], &device).unwrap();
    let b = RawTensor::from_vec(data(2, 10), &[2], &device).unwrap();
    let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
    grad_check(&[x.clone(), w.clone(), b.clone()], settings, |t| {
        t[0].batch_norm(Some(&t[1]), Some(&t[2]), None, true, 1e-5)
    })
    .unwrap();
    // Evaluation: the running statistics are constants.
    let (rm, rv) =
        (RawTensor::from_vec(vec![0.3, -0.2], &[2], &device).unwrap(), RawTensor::ones(&[2], &device).unwrap());
    grad_check(&[x, w, b], settings, |t| {
        let running = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
        t[0].batch_norm(Some(&t[1]), Some(&t[2]), Some(running), false, 1e-5)
    })
    .unwrap();
}

/// The kernels refuse storages shorter than their arguments say, and running statistics that
/// share memory, with errors.
#[test]
fn the_kernels_refuse_bad_storages() {
    let Some(device) = wgpu_or_skip() else { return };
    let b = device.backend();
    let args = BatchNormArgs { batch: 2, channels: 3, inner: 4, eps: 1e-5, batch_stats: true, relu: false };
    let (x, short, stats) =
        (b.from_f32(&[0.5; 24]).unwrap(), b.from_f32(&[0.5; 23]).unwrap(), b.from_f32(&[1.0; 3]).unwrap());
    assert!(b.batch_norm(&short, None, None, None, &args).is_err(), "a short input");
    assert!(b.batch_norm(&x, Some(&b.from_f32(&[1.0; 2]).unwrap()), None, None, &args).is_err(), "a short weight");
    let eval = BatchNormArgs { batch_stats: false, ..args };
    assert!(b.batch_norm(&x, None, None, None, &eval).is_err(), "evaluation without statistics");
    assert!(b.batch_norm_backward(&x, None, None, &stats, &stats, &short, &args).is_err(), "a short gradient");
    assert!(b.batch_norm(&x, None, None, None, &BatchNormArgs { inner: 0, ..args }).is_err(), "an empty axis");
    let (mean, var) = (b.from_f32(&[0.0; 3]).unwrap(), b.from_f32(&[1.0; 3]).unwrap());
    let running = b.from_f32(&[0.0; 3]).unwrap();
    assert!(
        b.batch_norm_update_running(&running, &running, &mean, &var, 0.1, &args).is_err(),
        "shared running statistics"
    );
    let other = b.from_f32(&[1.0; 3]).unwrap();
    b.batch_norm_update_running(&running, &other, &mean, &var, 0.1, &args).unwrap();
    let cpu = Device::cpu();
    let (rc, oc) = (cpu.backend().from_f32(&[0.0; 3]).unwrap(), cpu.backend().from_f32(&[1.0; 3]).unwrap());
    assert!(b.batch_norm_update_running(&rc, &oc, &mean, &var, 0.1, &args).is_err(), "CPU storages");
}

/// Running statistics that are views (from an offset) or one tensor for both update through the
/// composed ops instead of the kernel, with the same values on both devices.
#[test]
fn running_statistics_as_views_or_shared_update_alike() {
    let Some(device) = wgpu_or_skip() else { return };
    let run = |d: &Device| -> Result<Vec<Vec<f32>>> {
        let x = RawTensor::from_vec(data(4 * 3 * 5, 11), &[4, 3, 5], d)?;
        let store = RawTensor::from_vec(vec![0.5; 7], &[7], d)?;
        let (mean, var) = (store.narrow(0, 1, 4)?, store.narrow(0, 4, 7)?);
        x.batch_norm(None, None, Some(RunningStats { mean: &mean, var: &var, momentum: 0.2 }), true, 1e-5)?;
        let shared = RawTensor::ones(&[3], d)?;
        x.batch_norm(None, None, Some(RunningStats { mean: &shared, var: &shared, momentum: 0.3 }), true, 1e-5)?;
        Ok(vec![store.to_vec()?, shared.to_vec()?])
    };
    let (cpu, gpu) = (run(&Device::cpu()).unwrap(), run(&device).unwrap());
    compare("running statistics", &gpu, &cpu, 1e-5);
    assert_eq!(cpu[0][0], 0.5, "the view's update stays inside it");
}
