//! The batch norm with a fused ReLU (`RawTensor::batch_norm_relu`, `BatchNormArgs::relu` in
//! the batch norm kernels): PyTorch's `F.relu(F.batch_norm(..))` values and gradients in
//! training and evaluation, the fused op against the batch norm then a separate ReLU (values,
//! the gradients of input, weight and bias, the running statistics) on the CPU and on wgpu,
//! CPU ↔ wgpu parity, finite differences away from the ReLU's kink, and bad input.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::BatchNormArgs;
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, Result, RunningStats};

fn devices() -> Vec<Device> {
    [Device::cpu()].into_iter().chain(wgpu_or_skip()).collect()
}

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

/// The PyTorch case of `tests/ops/ops_nn.rs`'s batch norm with a ReLU after it.
fn pytorch_case_on(device: &Device) -> Result<()> {
    let t = |data: &[f32], shape: &[usize]| RawTensor::from_slice(data, shape, device);
    // x = ((7i) % 11)·0.3 - 1.5 and p = ((5i) % 7)·0.25 - 0.75, both [2, 3, 2, 2], float64;
    // w = [0.5, 1.5, -1], b = [0.1, -0.2, 0.3], rm = zeros(3), rv = ones(3);
    // y = F.relu(F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5));
    // (y * p).sum().backward(). Every pre-activation is at least 0.135 from the kink.
    let n = 24;
    let x =
        t(&(0..n).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.5).collect::<Vec<_>>(), &[2, 3, 2, 2])?.requires_grad_()?;
    let p = t(&(0..n).map(|i| ((i * 5) % 7) as f32 * 0.25 - 0.75).collect::<Vec<_>>(), &[2, 3, 2, 2])?;
    let w = t(&[0.5, 1.5, -1.0], &[3])?.requires_grad_()?;
    let b = t(&[0.1, -0.2, 0.3], &[3])?.requires_grad_()?;
    let (rm, rv) = (RawTensor::zeros(&[3], device)?, RawTensor::ones(&[3], device)?);
    let stats = || Some(RunningStats { mean: &rm, var: &rv, momentum: 0.1 });
    let y = x.batch_norm_relu(Some(&w), Some(&b), stats(), true, 1e-5)?;
    let grads = y.mul(&p)?.sum_all()?.backward()?;
    let grad = |t: &RawTensor| grads.get(t).expect("a gradient").to_vec();
    #[rustfmt::skip]
    let y_torch = [0.0, 0.2889813, 0.0, 0.7425363, 0.383652, 0.0, 1.940057, 0.0, 1.237037, 0.0, 0.3, 1.549383,
        0.2889813, 0.0, 0.7425363, 0.1377963, 0.0, 1.940057, 0.0, 0.0, 0.0, 0.3, 1.549383, 0.0];
    #[rustfmt::skip]
    let dx_torch = [-0.1407446, 0.2825717, -0.06731265, -0.1479464, 1.36246, -0.167275, -0.1923316,
        0.007272826, -0.2079158, -0.265046, 0.5856484, -0.3856745, 0.1565842, -0.06731265, -0.2739339,
        0.2580944, -0.167275, -0.6246664, 0.007272826, -0.2254576, -0.265046, 0.8459366, -0.1253863, -0.1825165];
    assert_close(&format!("{device} y"), &y.to_vec()?, &y_torch, 2e-5);
    assert_close(&format!("{device} dx"), &grad(&x)?, &dx_torch, 2e-5);
    assert_close(&format!("{device} dw"), &grad(&w)?, &[-1.285073, -0.7782027, -2.030248], 2e-5);
    assert_close(&format!("{device} db"), &grad(&b)?, &[0.0, 0.0, 0.5], 2e-5);
    // The running statistics' update is the batch norm's.
    assert_close(&format!("{device} rm"), &rm.to_vec()?, &[0.0225, -0.00375, -0.03], 1e-6);
    assert_close(&format!("{device} rv"), &rv.to_vec()?, &[1.0125, 0.9859821, 1.005429], 1e-6);
    // Then e = F.relu(F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5)) with the updated
    // rm, rv; (e * p).sum().backward().
    let (x, w, b) = (x.detach().requires_grad_()?, w.detach().requires_grad_()?, b.detach().requires_grad_()?);
    let e = x.batch_norm_relu(Some(&w), Some(&b), stats(), false, 1e-5)?;
    let grads = e.mul(&p)?.sum_all()?.backward()?;
    let grad = |t: &RawTensor| grads.get(t).expect("a gradient").to_vec();
    #[rustfmt::skip]
    let e_torch = [0.0, 0.3869606, 0.0, 0.834172, 0.2588501, 0.0, 1.618406, 0.0, 1.466831, 0.0, 0.5692688, 1.766019,
        0.3869606, 0.0, 0.834172, 0.2378902, 0.0, 1.618406, 0.0, 0.0, 0.0, 0.5692688, 1.766019, 0.0];
    #[rustfmt::skip]
    let edx_torch = [0.0, 0.2484508, 0.0, -0.2484508, 1.132963, 0.0, -0.3776544, 0.0, -0.4986459, 0.0,
        0.4986459, -0.7479688, 0.1242254, 0.0, -0.3726762, 0.2484508, 0.0, -0.7553088, 0.0, 0.0, 0.0, 0.7479688,
        -0.4986459, 0.0];
    assert_close(&format!("{device} e"), &e.to_vec()?, &e_torch, 2e-5);
    assert_close(&format!("{device} dx"), &grad(&x)?, &edx_torch, 2e-5);
    assert_close(&format!("{device} dw"), &grad(&w)?, &[-1.267099, -0.6797779, -2.079353], 2e-5);
    assert_close(&format!("{device} db"), &grad(&b)?, &[0.0, 0.0, 0.5], 2e-5);
    // Evaluation leaves the running statistics alone.
    assert_close(&format!("{device} rm"), &rm.to_vec()?, &[0.0225, -0.00375, -0.03], 1e-6);
    Ok(())
}

#[test]
fn matches_pytorch_in_training_and_eval() {
    for device in devices() {
        pytorch_case_on(&device).unwrap_or_else(|e| panic!("{device}: {e}"));
    }
}

/// One call: the input's shape, weight and bias or neither, training or evaluation.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<usize>,
    affine: bool,
    training: bool,
}

/// Output, the gradients of x (and of weight and bias with `affine`) of a weighted sum of the
/// output, and the running mean and variance after the call: through `batch_norm_relu`
/// (`fused`) or `batch_norm` then `relu`.
fn run(device: &Device, c: &Case, fused: bool) -> Result<Vec<Vec<f32>>> {
    let n: usize = c.shape.iter().product();
    let ch = c.shape[1];
    let x = RawTensor::from_vec(data(n, 1), &c.shape, device)?.requires_grad_()?;
    let w = RawTensor::from_vec(data(ch, 2), &[ch], device)?.requires_grad_()?;
    let b = RawTensor::from_vec(data(ch, 3), &[ch], device)?.requires_grad_()?;
    let rm = RawTensor::from_vec(data(ch, 4), &[ch], device)?;
    let rv = RawTensor::from_vec(data(ch, 5).iter().map(|v| v.abs() + 0.5).collect(), &[ch], device)?;
    let stats = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
    let (wo, bo) = if c.affine { (Some(&w), Some(&b)) } else { (None, None) };
    let out = if fused {
        x.batch_norm_relu(wo, bo, Some(stats), c.training, 1e-5)?
    } else {
        x.batch_norm(wo, bo, Some(stats), c.training, 1e-5)?.relu()?
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
    let shapes: [&[usize]; 5] = [
        &[4, 3, 5, 5],  // inner 25: one value per invocation
        &[2, 65, 4, 4], // 65 channels (one past the workgroup), inner 16: four per invocation
        &[8, 5],        // BatchNorm1d: inner 1
        &[3, 2, 7],     // [N, C, L]
        &[16, 4, 8, 8], // 1,024 values per channel: two workgroups each
    ];
    let mut cases = Vec::new();
    for shape in shapes {
        for affine in [true, false] {
            for training in [true, false] {
                cases.push(Case { shape: shape.to_vec(), affine, training });
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

/// The fused op against the batch norm then a ReLU on each device (the CPU's forward bit for
/// bit: both clamp the same values).
#[test]
fn fused_matches_batch_norm_then_relu() {
    for device in devices() {
        for c in cases() {
            let fused = run(&device, &c, true).unwrap_or_else(|e| panic!("{device} {c:?}: {e}"));
            let apart = run(&device, &c, false).unwrap();
            if matches!(device, Device::Cpu) {
                assert_eq!(fused[0], apart[0], "{device} {c:?}: forward");
            }
            compare(&format!("{device} {c:?}"), &fused, &apart, 1e-5);
        }
    }
}

#[test]
fn wgpu_matches_the_cpu() {
    let Some(device) = wgpu_or_skip() else { return };
    for c in cases() {
        let cpu = run(&Device::cpu(), &c, true).unwrap();
        let gpu = run(&device, &c, true).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        compare(&format!("{c:?}"), &gpu, &cpu, 1e-4);
    }
}

/// A strided input: the op makes it contiguous first.
#[test]
fn strided_input_matches_its_contiguous_copy() {
    for device in devices() {
        let x = RawTensor::from_vec(data(4 * 3 * 6, 7), &[6, 3, 4], &device).unwrap().transpose(0, 2).unwrap();
        let got = x.batch_norm_relu(None, None, None, true, 1e-5).unwrap().to_vec().unwrap();
        let want = x.contiguous().unwrap().batch_norm_relu(None, None, None, true, 1e-5).unwrap().to_vec().unwrap();
        assert_close(&format!("{device} strided"), &got, &want, 1e-6);
    }
}

/// Finite differences on the inputs of the PyTorch case, whose pre-activations stay at least
/// 0.135 from the kink, far beyond what a step of 1e-2 moves them.
#[test]
fn gradients_match_finite_differences() {
    for device in devices() {
        let n = 24;
        let x = RawTensor::from_vec((0..n).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.5).collect(), &[2, 3, 4], &device)
            .unwrap();
        let w = RawTensor::from_vec(vec![0.5, 1.5, -1.0], &[3], &device).unwrap();
        let b = RawTensor::from_vec(vec![0.1, -0.2, 0.3], &[3], &device).unwrap();
        let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
        grad_check(&[x.clone(), w.clone(), b.clone()], settings, |t| {
            t[0].batch_norm_relu(Some(&t[1]), Some(&t[2]), None, true, 1e-5)
        })
        .unwrap_or_else(|e| panic!("{device} training: {e}"));
        // Evaluation: the running statistics are constants.
        let rm = RawTensor::from_vec(vec![0.25, -0.25, 0.1], &[3], &device).unwrap();
        let rv = RawTensor::from_vec(vec![1.0, 1.5, 0.5], &[3], &device).unwrap();
        let pre =
            x.batch_norm(Some(&w), Some(&b), Some(RunningStats { mean: &rm, var: &rv, momentum: 0.1 }), false, 1e-5);
        let closest = pre.unwrap().to_vec().unwrap().iter().fold(f32::MAX, |m, v| m.min(v.abs()));
        assert!(closest > 0.05, "{device}: a pre-activation {closest} too near the kink for the check");
        grad_check(&[x, w, b], settings, |t| {
            let running = RunningStats { mean: &rm, var: &rv, momentum: 0.1 };
            t[0].batch_norm_relu(Some(&t[1]), Some(&t[2]), Some(running), false, 1e-5)
        })
        .unwrap_or_else(|e| panic!("{device} evaluation: {e}"));
    }
}

/// Bad input is an error naming `batch_norm_relu`, on every device.
#[test]
fn bad_input_is_an_error_naming_the_op() {
    for device in devices() {
        let x = RawTensor::from_vec(data(24, 8), &[2, 3, 4], &device).unwrap();
        let short = RawTensor::ones(&[2], &device).unwrap();
        let checks: [(&str, Result<RawTensor>); 5] = [
            ("a short weight", x.batch_norm_relu(Some(&short), None, None, true, 1e-5)),
            ("a short bias", x.batch_norm_relu(None, Some(&short), None, true, 1e-5)),
            ("a rank-1 input", short.batch_norm_relu(None, None, None, true, 1e-5)),
            ("one value per channel", x.reshape(&[1, 24]).unwrap().batch_norm_relu(None, None, None, true, 1e-5)),
            ("a negative eps", x.batch_norm_relu(None, None, None, true, -1.0)),
        ];
        for (what, got) in checks {
            match got {
                Err(Error::Shape { op, .. } | Error::InvalidArgument { op, .. }) => {
                    assert_eq!(op, "batch_norm_relu", "{device}: {what}")
                }
                other => panic!("{device}: {what}: expected an error, got {other:?}"),
            }
        }
        let stats = RunningStats { mean: &short, var: &short, momentum: 0.1 };
        let err = x.batch_norm_relu(None, None, Some(stats), false, 1e-5).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "batch_norm_relu", .. }), "{device}: short running statistics: {err}");
    }
}

/// The backward kernel refuses a short bias when the ReLU's mask needs it.
#[test]
fn the_backward_kernel_refuses_a_short_bias() {
    for device in devices() {
        let b = device.backend();
        let args = BatchNormArgs { batch: 2, channels: 3, inner: 4, eps: 1e-5, batch_stats: true, relu: true };
        let (x, stats, short) =
            (b.from_f32(&[0.5; 24]).unwrap(), b.from_f32(&[1.0; 3]).unwrap(), b.from_f32(&[1.0; 2]).unwrap());
        let got = b.batch_norm_backward(&x, None, Some(&short), &stats, &stats, &x, &args);
        assert!(got.is_err(), "{device}: a short bias");
        b.batch_norm_backward(&x, None, Some(&stats), &stats, &stats, &x, &args).unwrap();
    }
}
