//! The losses of `rumus::loss` (issue #30): every loss and reduction against PyTorch
//! (`tests/fixtures/torch_losses.safetensors`, written by `make_loss_fixture.py`) on the CPU and
//! on wgpu, finite-difference gradients of every loss and reduction, CPU ↔ wgpu parity of every loss (the fused weighted cross-entropy on short and
//! wide rows and non-contiguous logits), and bad input as errors.

use crate::common::torch_fixture::TorchFixture;
use proptest::prelude::*;
use rumus::loss::{self, CrossEntropyOptions, Reduction};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, Result};

fn reduction(name: &str) -> Reduction {
    match name {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        "batchmean" => Reduction::BatchMean,
        other => panic!("unknown reduction {other}"),
    }
}

/// A loss of the fixture: `(x, t, w, reduction)`, `t` as u32 indices when `classes`.
type LossCase = fn(&RawTensor, &RawTensor, Option<&RawTensor>, Reduction) -> Result<RawTensor>;

const CE_IGNORE: u32 = 7;

/// `(case, class targets, reductions, loss)`, with the hyper-parameters of make_loss_fixture.py.
const CASES: &[(&str, bool, &[&str], LossCase)] = &[
    ("ce_full", true, &["mean", "sum", "none"], |x, t, w, r| {
        let o = CrossEntropyOptions::default().ignore_index(CE_IGNORE).label_smoothing(0.1).reduction(r);
        loss::cross_entropy_with(x, t, &o.weight(w.expect("weights").clone()))
    }),
    ("ce_weight", true, &["mean", "sum", "none"], |x, t, w, r| {
        let o = CrossEntropyOptions::default().reduction(r).weight(w.expect("weights").clone());
        loss::cross_entropy_with(x, t, &o)
    }),
    ("ce_wide", true, &["mean", "sum", "none"], |x, t, _, r| {
        let o = CrossEntropyOptions::default().ignore_index(0).label_smoothing(0.2).reduction(r);
        loss::cross_entropy_with(x, t, &o)
    }),
    ("ce_seq", true, &["mean", "sum", "none"], |x, t, w, r| {
        let o = CrossEntropyOptions::default().ignore_index(9).reduction(r).weight(w.expect("weights").clone());
        loss::cross_entropy_with(x, t, &o)
    }),
    ("bce", false, &["mean", "sum", "none"], |x, t, _, r| loss::binary_cross_entropy(x, t, r)),
    ("bce_logits_pw", false, &["mean", "sum", "none"], |x, t, w, r| loss::bce_with_logits_with(x, t, w, r)),
    ("bce_logits", false, &["mean", "sum", "none"], |x, t, _, r| loss::bce_with_logits_with(x, t, None, r)),
    ("mse", false, &["mean", "sum", "none"], |x, t, _, r| loss::mse_loss_with(x, t, r)),
    ("l1", false, &["mean", "sum", "none"], |x, t, _, r| loss::l1_loss(x, t, r)),
    ("huber", false, &["mean", "sum", "none"], |x, t, _, r| loss::huber_loss(x, t, 0.7, r)),
    ("smooth_l1", false, &["mean", "sum", "none"], |x, t, _, r| loss::smooth_l1_loss(x, t, 0.5, r)),
    ("smooth_l1_b0", false, &["mean", "sum", "none"], |x, t, _, r| loss::smooth_l1_loss(x, t, 0.0, r)),
    ("kl", false, &["batchmean", "sum", "mean", "none"], |x, t, _, r| loss::kl_div(x, t, r, false)),
    ("kl_log", false, &["batchmean", "sum", "mean", "none"], |x, t, _, r| loss::kl_div(x, t, r, true)),
];

/// Relative tolerance: f32 against PyTorch's float64; BCE's gradients at its floors reach 1e12.
const TOL: f32 = 2e-5;

fn check_fixture_on(device: &Device) -> Result<()> {
    let f = TorchFixture::load("torch_losses.safetensors");
    let tensor = |name: &str| f.optional(name, device);
    for &(case, classes, reductions, op) in CASES {
        let x = tensor(&format!("{case}.x"))?.expect("every case has an input").requires_grad_()?;
        let (t_shape, t_values) = f.entry(&format!("{case}.t"));
        let t = if classes {
            let indices: Vec<u32> = t_values.iter().map(|&v| v as u32).collect();
            RawTensor::from_indices(&indices, t_shape, device)?
        } else {
            RawTensor::from_slice(t_values, t_shape, device)?.requires_grad_()?
        };
        let w = tensor(&format!("{case}.w"))?;
        for &red in reductions {
            let at = format!("{case} ({red}) on {device}");
            let y = op(&x, &t, w.as_ref(), reduction(red))?;
            let (want_shape, want) = f.entry(&format!("{case}.{red}.y"));
            assert_eq!(y.shape(), &want_shape[..], "{at}: output shape");
            assert_close(&format!("{at}: value"), &y.contiguous()?.to_vec()?, want, TOL);
            let gy = tensor(&format!("{case}.{red}.gy"))?.expect("upstream gradient");
            let grads = y.mul(&gy)?.sum_all()?.backward()?;
            let gx = grads.get(&x).unwrap_or_else(|| panic!("{at}: no input gradient")).to_vec()?;
            assert_close(&format!("{at}: input gradient"), &gx, f.get(&format!("{case}.{red}.grad.x")), TOL);
            if !classes {
                let gt = grads.get(&t).unwrap_or_else(|| panic!("{at}: no target gradient")).to_vec()?;
                // PyTorch's kl_div differentiates xlogy(t, t) into 0/0 = NaN where t = 0; rumus
                // gives 0 there (the limit of the loss's slope, t·log t being flat at 0).
                let want: Vec<f32> = f
                    .entry(&format!("{case}.{red}.grad.t"))
                    .1
                    .iter()
                    .zip(t_values)
                    .map(|(&g, &tv)| if g.is_nan() && tv == 0.0 && case == "kl" { 0.0 } else { g })
                    .collect();
                assert_close(&format!("{at}: target gradient"), &gt, &want, TOL);
            }
        }
    }
    Ok(())
}

#[test]
fn every_loss_and_reduction_matches_pytorch_on_the_cpu() -> Result<()> {
    check_fixture_on(&Device::cpu())
}

#[test]
fn every_loss_and_reduction_matches_pytorch_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_fixture_on(&gpu)
}

fn uniform(shape: &[usize], lo: f32, hi: f32, seed: u64) -> Result<RawTensor> {
    RawTensor::rand_uniform(shape, lo, hi, seed, &Device::cpu())
}

#[test]
fn class_losses_pass_finite_differences() -> Result<()> {
    let cpu = Device::cpu();
    let weight = RawTensor::from_vec(vec![0.5, 2.0, 1.0, 0.25], &[4], &cpu)?;
    let targets = RawTensor::from_indices(&[1, 5, 3, 0, 5], &[5], &cpu)?;
    for red in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for (smoothing, weighted) in [(0.0, false), (0.0, true), (0.15, true), (0.3, false)] {
            let mut o = CrossEntropyOptions::default().ignore_index(5).label_smoothing(smoothing).reduction(red);
            if weighted {
                o = o.weight(weight.clone());
            }
            grad_check(&[uniform(&[5, 4], -2.0, 2.0, 11)?], GradCheck::default(), |x| {
                loss::cross_entropy_with(&x[0], &targets, &o)
            })?;
        }
    }
    Ok(())
}

#[test]
fn pointwise_losses_pass_finite_differences() -> Result<()> {
    let settings = GradCheck::default();
    for red in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        // Differences kept away from 0 and from the thresholds (where the losses have kinks).
        let x = RawTensor::from_vec(vec![-1.9, -0.9, -0.2, 0.15, 0.35, 1.4], &[2, 3], &Device::cpu())?;
        let t = RawTensor::zeros(&[2, 3], &Device::cpu())?;
        grad_check(&[x.clone(), t.clone()], settings, |v| loss::mse_loss_with(&v[0], &v[1], red))?;
        grad_check(&[x.clone(), t.clone()], settings, |v| loss::l1_loss(&v[0], &v[1], red))?;
        grad_check(&[x.clone(), t.clone()], settings, |v| loss::huber_loss(&v[0], &v[1], 0.6, red))?;
        grad_check(&[x.clone(), t.clone()], settings, |v| loss::smooth_l1_loss(&v[0], &v[1], 0.5, red))?;
        grad_check(&[x.clone(), t.clone()], settings, |v| loss::smooth_l1_loss(&v[0], &v[1], 0.0, red))?;
        let logits = uniform(&[3, 4], -3.0, 3.0, 3)?;
        let soft = uniform(&[3, 4], 0.05, 0.95, 4)?;
        let pw = RawTensor::from_vec(vec![0.5, 1.0, 2.0, 3.0], &[4], &Device::cpu())?;
        grad_check(&[logits.clone(), soft.clone()], settings, |v| loss::bce_with_logits_with(&v[0], &v[1], None, red))?;
        grad_check(&[logits, soft.clone()], settings, |v| loss::bce_with_logits_with(&v[0], &v[1], Some(&pw), red))?;
        let probs = uniform(&[3, 4], 0.1, 0.9, 5)?;
        let bce = GradCheck { eps: 1e-3, ..settings };
        grad_check(&[probs, soft], bce, |v| loss::binary_cross_entropy(&v[0], &v[1], red))?;
    }
    for red in [Reduction::BatchMean, Reduction::Sum, Reduction::Mean, Reduction::None] {
        let log_p = uniform(&[3, 4], -1.0, 1.0, 6)?.log_softmax(-1)?;
        let q = uniform(&[3, 4], 0.2, 1.0, 7)?;
        let log_q = uniform(&[3, 4], -2.0, 0.0, 8)?;
        let kl = GradCheck { eps: 1e-3, ..GradCheck::default() };
        grad_check(&[log_p.clone(), q], kl, |v| loss::kl_div(&v[0], &v[1], red, false))?;
        grad_check(&[log_p, log_q], kl, |v| loss::kl_div(&v[0], &v[1], red, true))?;
    }
    Ok(())
}

/// The fused weighted, ignoring cross-entropy on the CPU and on wgpu: forward (every reduction)
/// and the logits' gradient, for short rows (one invocation per row), wide rows (a workgroup
/// per row) and transposed (non-contiguous) logits.
#[test]
fn weighted_cross_entropy_matches_between_cpu_and_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    for (rows, classes, transposed) in [(37, 6, false), (9, 300, false), (12, 5, true)] {
        let shape = if transposed { [classes, rows] } else { [rows, classes] };
        let data = RawTensor::rand_uniform(&shape, -4.0, 4.0, 21, &cpu)?.to_vec()?;
        let targets: Vec<u32> =
            (0..rows as u32).map(|r| if r % 4 == 3 { 1000 } else { (r * 7) % classes as u32 }).collect();
        let weights: Vec<f32> = (0..classes).map(|c| 0.25 + (c % 5) as f32 * 0.5).collect();
        let run = |device: &Device, red: Reduction| -> Result<(Vec<f32>, Vec<f32>)> {
            let x = RawTensor::from_vec(data.clone(), &shape, device)?.requires_grad_()?;
            let logits = if transposed { x.transpose(0, 1)? } else { x.clone() };
            let t = RawTensor::from_indices(&targets, &[rows], device)?;
            let w = RawTensor::from_vec(weights.clone(), &[classes], device)?;
            let o = CrossEntropyOptions::default().weight(w).ignore_index(1000).label_smoothing(0.1).reduction(red);
            let y = loss::cross_entropy_with(&logits, &t, &o)?;
            let g = y.sum_all()?.backward()?;
            Ok((y.to_vec()?, g.get(&x).expect("logits gradient").to_vec()?))
        };
        for red in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let ((y_cpu, g_cpu), (y_gpu, g_gpu)) = (run(&cpu, red)?, run(&gpu, red)?);
            let at = format!("[{rows}, {classes}] transposed {transposed} {red:?}");
            assert_close(&format!("{at}: loss"), &y_gpu, &y_cpu, 1e-5);
            assert_close(&format!("{at}: gradient"), &g_gpu, &g_cpu, 1e-5);
        }
    }
    Ok(())
}

#[test]
fn unweighted_cross_entropy_is_unchanged_by_the_options() -> Result<()> {
    let cpu = Device::cpu();
    let x = uniform(&[6, 5], -3.0, 3.0, 1)?;
    let t = RawTensor::from_indices(&[0, 4, 2, 2, 1, 3], &[6], &cpu)?;
    let plain = x.cross_entropy(&t, 0.1)?.item()?;
    let ones = RawTensor::ones(&[5], &cpu)?;
    let with = x.cross_entropy_with(&t, &CrossEntropyOptions::default().label_smoothing(0.1).weight(ones))?.item()?;
    assert!((plain - with).abs() <= 1e-6 * plain.abs().max(1.0), "{plain} vs {with}");
    // Every row ignored: 0 / 0, as in PyTorch.
    let zeros = RawTensor::from_indices(&[0; 6], &[6], &cpu)?;
    let none = x.cross_entropy_with(&zeros, &CrossEntropyOptions::default().ignore_index(0))?.item()?;
    assert!(none.is_nan(), "the mean over no rows is NaN, got {none}");
    Ok(())
}

#[test]
fn bad_loss_inputs_are_errors() -> Result<()> {
    let cpu = Device::cpu();
    let x = uniform(&[3, 4], -1.0, 1.0, 2)?;
    let t = RawTensor::from_indices(&[0, 3, 1], &[3], &cpu)?;
    let ce = |o: CrossEntropyOptions| loss::cross_entropy_with(&x, &t, &o);
    let weights = |w: Vec<f32>| RawTensor::from_vec(w.clone(), &[w.len()], &cpu);
    let invalid = |r: Result<RawTensor>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{what}: {r:?}");
    };
    invalid(ce(CrossEntropyOptions::default().weight(weights(vec![1.0, -1.0, 1.0, 1.0])?)), "a negative weight");
    invalid(ce(CrossEntropyOptions::default().weight(weights(vec![1.0, f32::NAN, 1.0, 1.0])?)), "a NaN weight");
    invalid(ce(CrossEntropyOptions::default().weight(weights(vec![1.0, f32::INFINITY, 1.0, 1.0])?)), "inf");
    invalid(ce(CrossEntropyOptions::default().label_smoothing(1.0)), "smoothing 1");
    invalid(ce(CrossEntropyOptions::default().reduction(Reduction::BatchMean)), "batchmean");
    let short = ce(CrossEntropyOptions::default().weight(weights(vec![1.0; 3])?));
    assert!(matches!(short, Err(Error::Shape { .. })), "3 weights for 4 classes: {short:?}");
    let wrong_rows = RawTensor::from_indices(&[0, 1], &[2], &cpu)?;
    assert!(matches!(x.cross_entropy_with(&wrong_rows, &CrossEntropyOptions::default()), Err(Error::Shape { .. })));
    let seq = uniform(&[2, 3, 4], -1.0, 1.0, 3)?;
    assert!(matches!(seq.cross_entropy_with(&t, &CrossEntropyOptions::default()), Err(Error::Shape { .. })));

    let y = uniform(&[3, 5], 0.1, 0.9, 4)?;
    for r in [
        loss::mse_loss_with(&x, &y, Reduction::Sum),
        loss::l1_loss(&x, &y, Reduction::Mean),
        loss::huber_loss(&x, &y, 1.0, Reduction::Mean),
        loss::smooth_l1_loss(&x, &y, 1.0, Reduction::Mean),
        loss::binary_cross_entropy(&x, &y, Reduction::Mean),
        loss::bce_with_logits_with(&x, &y, None, Reduction::Mean),
        loss::kl_div(&x, &y, Reduction::BatchMean, false),
    ] {
        assert!(matches!(r, Err(Error::Shape { .. })), "shapes [3, 4] and [3, 5]: {r:?}");
    }
    let same = uniform(&[3, 4], 0.1, 0.9, 5)?;
    invalid(loss::huber_loss(&x, &same, 0.0, Reduction::Mean), "delta 0");
    invalid(loss::huber_loss(&x, &same, f32::NAN, Reduction::Mean), "delta NaN");
    invalid(loss::smooth_l1_loss(&x, &same, -1.0, Reduction::Mean), "beta -1");
    invalid(loss::l1_loss(&x, &same, Reduction::BatchMean), "batchmean outside kl_div");
    let pw = weights(vec![1.0; 3])?;
    let r = loss::bce_with_logits_with(&x, &same, Some(&pw), Reduction::Mean);
    assert!(matches!(r, Err(Error::Shape { .. })), "pos_weight [3] for targets [3, 4]: {r:?}");
    Ok(())
}

fn out_of_range(device: &Device, classes: usize, targets: &[u32], ignore: Option<u32>) -> Result<()> {
    let x = RawTensor::zeros(&[targets.len(), classes], device)?.requires_grad_()?;
    let t = RawTensor::from_indices(targets, &[targets.len()], device)?;
    let mut o = CrossEntropyOptions::default().weight(RawTensor::ones(&[classes], device)?);
    if let Some(i) = ignore {
        o = o.ignore_index(i);
    }
    let bad = targets.iter().position(|&c| c as usize >= classes && Some(c) != ignore);
    match (loss::cross_entropy_with(&x, &t, &o), bad) {
        (Err(Error::IndexOutOfRange { position, .. }), Some(p)) => assert_eq!(position, p, "on {device}"),
        (Ok(l), None) => drop(l.backward()?),
        (r, bad) => {
            panic!("targets {targets:?} of {classes} classes, ignoring {ignore:?}, on {device}: {r:?}, bad {bad:?}")
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// A target at or past the classes is an error naming its position unless it is the ignored
    /// value, on the CPU and on wgpu.
    #[test]
    fn a_class_out_of_range_is_an_error_unless_ignored(
        classes in 1usize..6,
        targets in proptest::collection::vec(0u32..9, 1..7),
        ignore in proptest::option::of(0u32..9),
    ) {
        out_of_range(&Device::cpu(), classes, &targets, ignore).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Some(gpu) = wgpu_or_skip() {
            out_of_range(&gpu, classes, &targets, ignore).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}

/// Every elementwise loss and reduction, value and both gradients, the same on the CPU and on
/// wgpu (they are composed of ops with parity tests of their own; this checks the compositions
/// and their backward rules).
#[test]
fn pointwise_losses_match_between_cpu_and_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    type Pointwise = fn(&RawTensor, &RawTensor, &RawTensor, Reduction) -> Result<RawTensor>;
    let cases: [(&str, Pointwise); 9] = [
        ("mse", |x, t, _, r| loss::mse_loss_with(x, t, r)),
        ("l1", |x, t, _, r| loss::l1_loss(x, t, r)),
        ("huber", |x, t, _, r| loss::huber_loss(x, t, 0.7, r)),
        ("smooth_l1", |x, t, _, r| loss::smooth_l1_loss(x, t, 0.4, r)),
        ("bce", |x, t, _, r| loss::binary_cross_entropy(&x.sigmoid()?, t, r)),
        ("bce_logits", |x, t, _, r| loss::bce_with_logits_with(x, t, None, r)),
        ("bce_logits_pw", |x, t, pw, r| loss::bce_with_logits_with(x, t, Some(pw), r)),
        ("kl", |x, t, _, r| loss::kl_div(&x.log_softmax(-1)?, t, r, false)),
        ("kl_log", |x, t, _, r| loss::kl_div(&x.log_softmax(-1)?, &t.log()?, r, true)),
    ];
    let cpu = Device::cpu();
    let x = uniform(&[5, 6], -4.0, 4.0, 31)?.to_vec()?;
    let t = uniform(&[5, 6], 0.0, 1.0, 32)?.to_vec()?;
    let pw = uniform(&[6], 0.2, 3.0, 33)?.to_vec()?;
    let run = |device: &Device, f: Pointwise, r: Reduction| -> Result<Vec<Vec<f32>>> {
        let xs = RawTensor::from_slice(&x, &[5, 6], device)?.requires_grad_()?;
        let ts = RawTensor::from_slice(&t, &[5, 6], device)?.requires_grad_()?;
        let y = f(&xs, &ts, &RawTensor::from_slice(&pw, &[6], device)?, r)?;
        let g = y.sum_all()?.backward()?;
        Ok(vec![
            y.to_vec()?,
            g.get(&xs).expect("input gradient").to_vec()?,
            g.get(&ts).expect("target gradient").to_vec()?,
        ])
    };
    for (name, f) in cases {
        let reductions: &[Reduction] = if name.starts_with("kl") {
            &[Reduction::BatchMean, Reduction::Mean, Reduction::Sum, Reduction::None]
        } else {
            &[Reduction::Mean, Reduction::Sum, Reduction::None]
        };
        for &r in reductions {
            let (want, got) = (run(&cpu, f, r)?, run(&gpu, f, r)?);
            for (what, (g, w)) in ["value", "input gradient", "target gradient"].iter().zip(got.iter().zip(&want)) {
                assert_close(&format!("{name} {r:?} {what}"), g, w, 1e-5);
            }
        }
    }
    Ok(())
}
