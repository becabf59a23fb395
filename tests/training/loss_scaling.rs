//! Dynamic loss scaling (`LossScaler`, PyTorch's `torch.amp.GradScaler`): scaled gradients
//! unscale to the plain ones and step the same, non-finite ones skip the step and back off, the
//! scale grows after its interval and stays finite and positive, bad settings are errors, the
//! fused unscale-and-check does the same on wgpu, and `fit` with a scaler (gradient
//! accumulation, clipping, data-parallel) trains as without one.

use proptest::prelude::*;
use rumus::distributed::Distributed;
use rumus::nn::{named_parameters, Module, Param};
use rumus::optim::{LossScaler, Optimizer};
use rumus::prelude::*;
use rumus::Gradients;

use crate::common::{regression_data, weights, LinReg};
use crate::distributed::Mirrored;

/// `x` (8 samples of 4 features) and `y = x · [1, -2, 0.5, 3] + 0.1`.
fn batch() -> (RawTensor, RawTensor) {
    let x = RawTensor::randn(&[8, 4], 0.0, 1.0, 11, &Device::cpu()).unwrap();
    let w = [1.0f32, -2.0, 0.5, 3.0];
    let y: Vec<f32> =
        x.to_vec().unwrap().chunks(4).map(|r| r.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() + 0.1).collect();
    (x, RawTensor::from_vec(y, &[8, 1], &Device::cpu()).unwrap())
}

fn mse(model: &LinReg, x: &RawTensor, y: &RawTensor) -> RawTensor {
    model.forward_raw(x).unwrap().mse_loss(y).unwrap()
}

/// Every parameter's gradient, by name.
fn gradient_values(params: &[(String, Param)], grads: &Gradients) -> Vec<(String, Vec<f32>)> {
    params.iter().map(|(n, p)| (n.clone(), grads.get(p.tensor()).unwrap().to_vec().unwrap())).collect()
}

fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * w.abs().max(1e-6), "{what}[{i}]: {g} against {w}");
    }
}

#[test]
fn scaled_gradients_unscale_to_the_plain_ones_and_step_the_same() {
    let (x, y) = batch();
    // Powers of two scale exactly; 1000 and 3.7 round.
    for scale in [65536.0, 1000.0, 3.7, 0.125] {
        let plain = LinReg::new(1).unwrap();
        let params = named_parameters(&plain);
        let grads = mse(&plain, &x, &y).backward().unwrap();
        let want = gradient_values(&params, &grads);
        Sgd::new(0.1).step(&params, &grads).unwrap();

        let scaled = LinReg::new(1).unwrap();
        let scaled_params = named_parameters(&scaled);
        let mut scaler = LossScaler::new().with_initial_scale(scale).unwrap();
        let mut grads = scaler.scale_loss(&mse(&scaled, &x, &y)).unwrap().backward().unwrap();
        let raw = gradient_values(&scaled_params, &grads);
        assert!(scaler.step(&mut Sgd::new(0.1), &scaled_params, &mut grads, None).unwrap());
        for (((name, got), (_, want)), (_, raw)) in gradient_values(&scaled_params, &grads).iter().zip(&want).zip(&raw)
        {
            assert_close(got, want, 1e-6, &format!("scale {scale}: unscaled gradient of {name}"));
            let raw_unscaled: Vec<f32> = raw.iter().map(|v| v / scale).collect();
            assert_close(&raw_unscaled, want, 1e-6, &format!("scale {scale}: backward scaled {name}"));
        }
        for ((name, got), (_, want)) in weights(&scaled).iter().zip(weights(&plain).iter()) {
            assert_close(got, want, 1e-6, &format!("scale {scale}: {name} after the step"));
        }
        assert_eq!((scaler.scale(), scaler.skipped_steps()), (scale, 0));
    }
}

#[test]
fn a_non_finite_gradient_skips_the_step_and_backs_off() {
    let device = Device::cpu();
    let model = LinReg::new(1).unwrap();
    let params = named_parameters(&model);
    let before = weights(&model);
    // d loss / d weight = 4 · scale, infinite at 3e38; d loss / d bias = scale, finite.
    let x = RawTensor::from_vec(vec![4.0; 4], &[1, 4], &device).unwrap();
    let loss = || model.forward_raw(&x).unwrap().sum_all().unwrap();
    let mut scaler = LossScaler::new().with_initial_scale(3e38).unwrap();
    let mut opt = Sgd::new(0.1);
    for (expected_scale, skipped) in [(1.5e38, 1), (7.5e37, 2)] {
        let mut grads = scaler.scale_loss(&loss()).unwrap().backward().unwrap();
        assert!(!scaler.step(&mut opt, &params, &mut grads, Some(1.0)).unwrap(), "overflow: no step");
        assert_eq!(weights(&model), before, "a skipped step leaves the weights bit for bit");
        assert_eq!((scaler.scale(), scaler.skipped_steps()), (expected_scale, skipped));
    }
    // 4 · 7.5e37 = 3e38 is finite: this one steps, the weight by lr · 4 and the bias by lr.
    let mut grads = scaler.scale_loss(&loss()).unwrap().backward().unwrap();
    assert!(scaler.step(&mut opt, &params, &mut grads, None).unwrap());
    let after = weights(&model);
    assert_close(&after[0].1, &before[0].1.iter().map(|w| w - 0.4).collect::<Vec<_>>(), 1e-6, "weight");
    assert_close(&after[1].1, &[before[1].1[0] - 0.1], 1e-6, "bias");
    assert_eq!((scaler.scale(), scaler.skipped_steps()), (7.5e37, 2));

    // NaN inputs give NaN gradients at every scale: skipped until the scale would underflow.
    let nan = RawTensor::from_vec(vec![f32::NAN; 4], &[1, 4], &device).unwrap();
    let mut scaler = LossScaler::new().with_initial_scale(1e-35).unwrap().backoff_factor(0.01).unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let mut grads = scaler.scale_loss(&model.forward_raw(&nan).unwrap().sum_all().unwrap()).unwrap().backward();
        outcomes.push(scaler.step(&mut opt, &params, grads.as_mut().unwrap(), None));
    }
    assert!(matches!(outcomes[0], Ok(false)), "{:?}", outcomes[0]);
    match &outcomes[1] {
        Err(Error::NonFinite(msg)) => assert!(msg.contains("every scale"), "{msg}"),
        other => panic!("expected NonFinite, got {other:?}"),
    }
    assert!(scaler.scale() > 0.0 && scaler.scale().is_finite(), "{}", scaler.scale());
    assert_eq!(weights(&model), after, "no skipped step touched the weights");
}

/// One step of `scaler` on `loss = sum(w · c)` (so `d loss / d w = c`); true when it stepped.
fn step_on(scaler: &mut LossScaler, w: &Param, c: &[f32]) -> Result<bool> {
    let c = RawTensor::from_vec(c.to_vec(), &[c.len()], &Device::cpu())?;
    let mut grads = scaler.scale_loss(&w.tensor().mul(&c)?.sum_all()?)?.backward()?;
    scaler.step(&mut Sgd::new(0.0), &[("w".to_string(), w.clone())], &mut grads, None)
}

#[test]
fn the_scale_grows_after_its_interval_and_a_skip_restarts_the_count() {
    let w = Param::new(RawTensor::zeros(&[2], &Device::cpu()).unwrap()).unwrap();
    let mut scaler = LossScaler::new().with_initial_scale(1.0).unwrap().growth_interval(3).unwrap();
    let mut scales = Vec::new();
    for c in [[1.0, 2.0]; 3] {
        assert!(step_on(&mut scaler, &w, &c).unwrap());
        scales.push(scaler.scale());
    }
    assert_eq!(scales, [1.0, 1.0, 2.0], "doubles after the third good step");
    assert!(step_on(&mut scaler, &w, &[1.0, 1.0]).unwrap());
    assert!(step_on(&mut scaler, &w, &[1.0, 1.0]).unwrap());
    assert!(!step_on(&mut scaler, &w, &[f32::INFINITY, 1.0]).unwrap());
    assert_eq!((scaler.scale(), scaler.skipped_steps()), (1.0, 1), "halved; two good steps forgotten");
    for want in [1.0, 1.0, 2.0] {
        assert!(step_on(&mut scaler, &w, &[1.0, 1.0]).unwrap());
        assert_eq!(scaler.scale(), want);
    }
}

#[test]
fn bad_settings_are_errors_naming_the_setter_and_no_gradient_is_a_step_with_nothing_to_do() {
    let cases: [(&str, Result<LossScaler>); 6] = [
        ("with_initial_scale", LossScaler::new().with_initial_scale(0.0)),
        ("with_initial_scale", LossScaler::new().with_initial_scale(f32::INFINITY)),
        ("growth_factor", LossScaler::new().growth_factor(0.5)),
        ("backoff_factor", LossScaler::new().backoff_factor(1.5)),
        ("backoff_factor", LossScaler::new().backoff_factor(f32::NAN)),
        ("growth_interval", LossScaler::new().growth_interval(0)),
    ];
    for (setter, result) in cases {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{setter}: {err:?}");
        assert!(err.to_string().contains(setter), "{setter}: {err}");
    }
    let model = LinReg::new(1).unwrap();
    let params = named_parameters(&model);
    let mut scaler = LossScaler::new();
    let err = scaler.step(&mut Sgd::new(0.1), &params, &mut Gradients::default(), Some(-1.0)).unwrap_err();
    assert!(err.to_string().contains("max_norm"), "{err}");
    let before = weights(&model);
    assert!(scaler.step(&mut Sgd::new(0.1), &params, &mut Gradients::default(), Some(1.0)).unwrap());
    assert_eq!((weights(&model), scaler.scale(), scaler.skipped_steps()), (before, 65536.0, 0));
}

/// On wgpu as on the CPU: the fused unscale-and-check gives the plain gradients and steps, and
/// a NaN or infinite gradient in one of two parameters (one flag per device) skips the step and
/// backs off, with one host read of the flag per step.
#[test]
fn the_scaler_unscales_and_skips_on_wgpu_as_on_the_cpu() -> Result<()> {
    let Some(gpu) = rumus::testing::wgpu_or_skip() else { return Ok(()) };
    for device in [Device::cpu(), gpu] {
        let w = Param::new(RawTensor::zeros(&[3], &device)?)?;
        let b = Param::new(RawTensor::zeros(&[300], &device)?)?;
        let params = [("w".to_string(), w.clone()), ("b".to_string(), b.clone())];
        let mut scaler = LossScaler::new().with_initial_scale(1024.0)?;
        let step = |scaler: &mut LossScaler, cw: &[f32], cb: f32| -> Result<(bool, Vec<f32>)> {
            let cw = RawTensor::from_vec(cw.to_vec(), &[3], &device)?;
            let loss = w.tensor().mul(&cw)?.sum_all()?.add(&b.tensor().mul_scalar(cb)?.sum_all()?)?;
            let mut grads = scaler.scale_loss(&loss)?.backward()?;
            let stepped = scaler.step(&mut Sgd::new(0.0), &params, &mut grads, None)?;
            Ok((stepped, grads.get(w.tensor()).expect("w's gradient").to_vec()?))
        };
        assert_eq!(step(&mut scaler, &[1.0, -2.0, 0.5], 3.0)?, (true, vec![1.0, -2.0, 0.5]), "{device:?}");
        assert!(!step(&mut scaler, &[1.0, -2.0, 0.5], f32::INFINITY)?.0, "{device:?}: an infinite gradient of b");
        assert!(!step(&mut scaler, &[f32::NAN, -2.0, 0.5], 3.0)?.0, "{device:?}: a NaN gradient of w");
        assert_eq!((scaler.scale(), scaler.skipped_steps()), (256.0, 2), "{device:?}");
        assert_eq!(step(&mut scaler, &[4.0, 0.0, -1.0], 3.0)?, (true, vec![4.0, 0.0, -1.0]), "{device:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// At any scale from 2^-10 to 2^20, the unscaled gradients of `sum(w · c)` are `c` within
    /// f32 rounding.
    #[test]
    fn unscaled_gradients_match_the_plain_ones_at_any_scale(
        exponent in -10.0f32..20.0,
        c in proptest::collection::vec(-1e-2f32..1e-2, 1..16),
    ) {
        let scale = exponent.exp2();
        let w = Param::new(RawTensor::zeros(&[c.len()], &Device::cpu()).unwrap()).unwrap();
        let params = [("w".to_string(), w.clone())];
        let mut scaler = LossScaler::new().with_initial_scale(scale).unwrap();
        let coefficients = RawTensor::from_vec(c.clone(), &[c.len()], &Device::cpu()).unwrap();
        let loss = w.tensor().mul(&coefficients).unwrap().sum_all().unwrap();
        let mut grads = scaler.scale_loss(&loss).unwrap().backward().unwrap();
        prop_assert!(scaler.step(&mut Sgd::new(0.0), &params, &mut grads, None).unwrap());
        let got = grads.get(w.tensor()).unwrap().to_vec().unwrap();
        for (g, want) in got.iter().zip(&c) {
            prop_assert!((g - want).abs() <= 1e-6 * want.abs(), "scale {}: {} against {}", scale, g, want);
        }
    }

    /// Over any run of finite and non-finite steps the scale follows PyTorch's rule, stays
    /// finite and > 0, and only an underflowing backoff is an error.
    #[test]
    fn the_scale_stays_finite_and_positive_over_any_run_of_steps(
        exponent in -10.0f32..20.0,
        growth in 1.01f32..1e4,
        backoff in 1e-3f32..0.999,
        interval in 1usize..4,
        finite in proptest::collection::vec(any::<bool>(), 1..40),
    ) {
        let w = Param::new(RawTensor::zeros(&[1], &Device::cpu()).unwrap()).unwrap();
        let mut scaler = LossScaler::new()
            .with_initial_scale(exponent.exp2()).unwrap()
            .growth_factor(growth).unwrap()
            .backoff_factor(backoff).unwrap()
            .growth_interval(interval).unwrap();
        let (mut scale, mut good, mut skipped) = (scaler.scale(), 0, 0);
        for ok in finite {
            let stepped = step_on(&mut scaler, &w, &[if ok { 0.5 } else { f32::NAN }]);
            if ok {
                prop_assert!(stepped.unwrap());
                good += 1;
                if good == interval {
                    good = 0;
                    scale = (scale * growth).min(f32::MAX);
                }
            } else {
                good = 0;
                skipped += 1;
                if scale * backoff < f32::MIN_POSITIVE {
                    prop_assert!(matches!(stepped, Err(Error::NonFinite(_))), "{:?}", stepped);
                    prop_assert_eq!(scaler.scale(), scale);
                    break;
                }
                prop_assert!(!stepped.unwrap());
                scale *= backoff;
            }
            prop_assert_eq!((scaler.scale(), scaler.skipped_steps()), (scale, skipped));
            prop_assert!(scaler.scale().is_finite() && scaler.scale() > 0.0);
        }
    }
}

fn quiet(epochs: usize) -> Fit<'static> {
    Fit::epochs(epochs).batch_size(16).optimizer(Sgd::new(0.05)).verbose(Verbosity::Quiet)
}

#[test]
fn fit_with_a_loss_scaler_trains_as_without_and_logs_the_scale() {
    let data = regression_data(64, 1).unwrap();
    for (accumulate, clip) in [(1, None), (2, Some(1.0))] {
        let settings = |cfg: Fit<'static>| {
            let cfg = cfg.accumulate_grad_batches(accumulate);
            match clip {
                Some(max_norm) => cfg.clip_grad_norm(max_norm),
                None => cfg,
            }
        };
        let mut plain = LinReg::new(2).unwrap();
        let plain_history = plain.fit(&data, settings(quiet(3))).unwrap();
        let mut scaled = LinReg::new(2).unwrap();
        let mut stopper = EarlyStopping::new("loss_scale").patience(10);
        let cfg = settings(quiet(3)).loss_scaler(LossScaler::new().growth_interval(3).unwrap()).callback(&mut stopper);
        let scaled_history = scaled.fit(&data, cfg).unwrap();
        let what = format!("accumulate {accumulate}, clip {clip:?}");
        assert_close(scaled_history.get("loss").unwrap(), plain_history.get("loss").unwrap(), 1e-5, &what);
        for ((name, got), (_, want)) in weights(&scaled).iter().zip(weights(&plain).iter()) {
            assert_close(got, want, 1e-5, &format!("{what}: {name}"));
        }
        // 4 batches an epoch: 4 (or 2) steps, doubling every 3.
        let want = if accumulate == 1 { [131072.0, 262144.0, 1048576.0] } else { [65536.0, 131072.0, 262144.0] };
        assert_eq!(scaled_history.get("loss_scale"), Some(&want[..]), "{what}");
        assert_eq!(plain_history.get("loss_scale"), None);
    }
    // Without a scaler a callback monitoring `loss_scale` is an error when `fit` starts.
    let mut model = LinReg::new(2).unwrap();
    let err = model.fit(&data, quiet(1).callback(EarlyStopping::new("loss_scale"))).unwrap_err();
    assert!(err.to_string().contains("loss_scale"), "{err}");
}

#[test]
fn data_parallel_fit_with_a_loss_scaler_averages_scaled_gradients_and_skips_overflows_together() {
    let data = regression_data(64, 3).unwrap();
    let dist = Distributed::new(Mirrored);
    let mut plain = LinReg::new(1).unwrap();
    plain.fit(&data, quiet(2).batch_size(8).accumulate_grad_batches(2).distributed(&dist)).unwrap();
    let mut scaled = LinReg::new(1).unwrap();
    let cfg = quiet(2).batch_size(8).accumulate_grad_batches(2).distributed(&dist).loss_scaler(LossScaler::new());
    let history = scaled.fit(&data, cfg).unwrap();
    assert_eq!(weights(&scaled), weights(&plain), "power-of-two scaling is exact");
    assert_eq!(history.get("loss_scale"), Some(&[65536.0, 65536.0][..]));

    // Scaled gradients that overflow are no error with a scaler: the step is skipped.
    let mut overflowing = LinReg::new(1).unwrap();
    let cfg =
        quiet(1).batch_size(8).distributed(&dist).loss_scaler(LossScaler::new().with_initial_scale(3e38).unwrap());
    let history = overflowing.fit(&data, cfg).unwrap();
    let scale = history.get("loss_scale").unwrap()[0];
    assert!(scale < 3e38 && scale > 0.0, "the scale backed off: {scale}");
    assert!(weights(&overflowing).iter().all(|(_, w)| w.iter().all(|v| v.is_finite())));
}
