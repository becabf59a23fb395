//! Optimizers against PyTorch's update rules (re-derived here in f64 from `torch.optim`'s
//! documented algorithms), schedules and gradient clipping.

use rumus::nn::Param;
use rumus::optim::schedule::{CosineAnnealing, ExponentialLr, LinearWarmup, OneCycle, Progress, StepLr};
use rumus::optim::{clip_grad_norm, Adam, AdamW, Optimizer, RmsProp, Schedule, Sgd};
use rumus::{Device, RawTensor, Result};

const P0: [f64; 3] = [1.0, -0.5, 2.0];

/// The gradient of step `t`: `loss = sum(p · c_t)` has gradient `c_t` whatever `p` is.
fn grad(t: usize) -> [f64; 3] {
    let s = if t.is_multiple_of(2) { 1.0 } else { -0.5 };
    [0.5 * s * (t + 1) as f64, -1.0 + 0.25 * t as f64, 2.0 * s]
}

/// Runs `steps` steps of `opt` on a fresh parameter and returns its final values.
fn run(opt: &mut dyn Optimizer, steps: usize) -> Result<Vec<f32>> {
    let cpu = Device::cpu();
    let p0: Vec<f32> = P0.iter().map(|&v| v as f32).collect();
    let param = Param::new(RawTensor::from_vec(p0, &[3], &cpu)?)?;
    let params = vec![("w".to_string(), param.clone())];
    for t in 0..steps {
        let c: Vec<f32> = grad(t).iter().map(|&v| v as f32).collect();
        let loss = param.tensor().mul(&RawTensor::from_vec(c, &[3], &cpu)?)?.sum_all()?;
        opt.step(&params, &loss.backward()?)?;
    }
    param.to_vec()
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() < 1e-5 * w.abs().max(1.0), "{what}: got {got:?}, want {want:?}");
    }
}

fn sgd_reference(lr: f64, momentum: f64, dampening: f64, wd: f64, nesterov: bool, steps: usize) -> Vec<f64> {
    let mut p = P0.to_vec();
    let mut buf = [0.0; 3];
    for t in 0..steps {
        for i in 0..3 {
            let mut g = grad(t)[i] + wd * p[i];
            if momentum != 0.0 {
                buf[i] = if t == 0 { g } else { momentum * buf[i] + (1.0 - dampening) * g };
                g = if nesterov { g + momentum * buf[i] } else { buf[i] };
            }
            p[i] -= lr * g;
        }
    }
    p
}

fn adam_reference(lr: f64, b1: f64, b2: f64, eps: f64, wd: f64, decoupled: bool, steps: usize) -> Vec<f64> {
    let mut p = P0.to_vec();
    let (mut m, mut v) = ([0.0; 3], [0.0; 3]);
    for t in 0..steps {
        let step = (t + 1) as i32;
        for i in 0..3 {
            let mut g = grad(t)[i];
            if decoupled {
                p[i] *= 1.0 - lr * wd;
            } else {
                g += wd * p[i];
            }
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let m_hat = m[i] / (1.0 - b1.powi(step));
            let v_hat = v[i] / (1.0 - b2.powi(step));
            p[i] -= lr * m_hat / (v_hat.sqrt() + eps);
        }
    }
    p
}

fn rmsprop_reference(lr: f64, alpha: f64, eps: f64, wd: f64, momentum: f64, steps: usize) -> Vec<f64> {
    let mut p = P0.to_vec();
    let (mut sq, mut buf) = ([0.0; 3], [0.0; 3]);
    for t in 0..steps {
        for i in 0..3 {
            let g = grad(t)[i] + wd * p[i];
            sq[i] = alpha * sq[i] + (1.0 - alpha) * g * g;
            let u = g / (sq[i].sqrt() + eps);
            if momentum > 0.0 {
                buf[i] = momentum * buf[i] + u;
                p[i] -= lr * buf[i];
            } else {
                p[i] -= lr * u;
            }
        }
    }
    p
}

#[test]
fn sgd_variants_follow_pytorch() -> Result<()> {
    assert_close(&run(&mut Sgd::new(0.1), 4)?, &sgd_reference(0.1, 0.0, 0.0, 0.0, false, 4), "plain");
    assert_close(&run(&mut Sgd::new(0.1).momentum(0.9), 4)?, &sgd_reference(0.1, 0.9, 0.0, 0.0, false, 4), "momentum");
    assert_close(
        &run(&mut Sgd::new(0.1).momentum(0.9).dampening(0.3).weight_decay(0.01), 4)?,
        &sgd_reference(0.1, 0.9, 0.3, 0.01, false, 4),
        "dampening + weight decay",
    );
    assert_close(
        &run(&mut Sgd::new(0.05).momentum(0.8).nesterov(true).weight_decay(0.1), 4)?,
        &sgd_reference(0.05, 0.8, 0.0, 0.1, true, 4),
        "nesterov",
    );
    // Nesterov without momentum is rejected, as in PyTorch.
    assert!(run(&mut Sgd::new(0.1).nesterov(true), 1).is_err());
    Ok(())
}

#[test]
fn adam_and_adamw_follow_pytorch() -> Result<()> {
    // The first Adam step moves each weight by lr against the gradient's sign.
    let one = run(&mut Adam::new(0.1), 1)?;
    assert_close(&one, &[0.9, -0.4, 1.9], "first step");
    assert_close(&run(&mut Adam::new(1e-2), 5)?, &adam_reference(1e-2, 0.9, 0.999, 1e-8, 0.0, false, 5), "adam");
    assert_close(
        &run(&mut Adam::new(1e-2).betas(0.8, 0.99).eps(1e-6).weight_decay(0.1), 5)?,
        &adam_reference(1e-2, 0.8, 0.99, 1e-6, 0.1, false, 5),
        "adam + L2",
    );
    assert_close(&run(&mut AdamW::new(1e-2), 5)?, &adam_reference(1e-2, 0.9, 0.999, 1e-8, 0.01, true, 5), "adamw");
    assert!(run(&mut Adam::new(0.1).betas(1.0, 0.9), 1).is_err());
    Ok(())
}

#[test]
fn rmsprop_follows_pytorch() -> Result<()> {
    assert_close(&run(&mut RmsProp::new(1e-2), 5)?, &rmsprop_reference(1e-2, 0.99, 1e-8, 0.0, 0.0, 5), "rmsprop");
    assert_close(
        &run(&mut RmsProp::new(1e-2).alpha(0.9).momentum(0.5).weight_decay(0.05), 5)?,
        &rmsprop_reference(1e-2, 0.9, 1e-8, 0.05, 0.5, 5),
        "rmsprop + momentum",
    );
    Ok(())
}

#[test]
fn frozen_buffers_and_parameters_without_gradients_are_left_alone() -> Result<()> {
    let cpu = Device::cpu();
    let used = Param::new(RawTensor::from_vec(vec![1.0], &[1], &cpu)?)?;
    let unused = Param::new(RawTensor::from_vec(vec![5.0], &[1], &cpu)?)?;
    let buffer = Param::buffer(RawTensor::from_vec(vec![7.0], &[1], &cpu)?)?;
    let params =
        vec![("a".to_string(), used.clone()), ("b".to_string(), unused.clone()), ("c".to_string(), buffer.clone())];
    let grads = used.tensor().mul_scalar(3.0)?.sum_all()?.backward()?;
    Sgd::new(0.1).step(&params, &grads)?;
    assert_eq!(used.to_vec()?, [0.7]);
    assert_eq!(unused.to_vec()?, [5.0]);
    assert_eq!(buffer.to_vec()?, [7.0]);
    Ok(())
}

#[test]
fn clip_grad_norm_scales_all_gradients_by_the_global_norm() -> Result<()> {
    let cpu = Device::cpu();
    let a = Param::new(RawTensor::from_vec(vec![0.0, 0.0], &[2], &cpu)?)?;
    let b = Param::new(RawTensor::from_vec(vec![0.0], &[1], &cpu)?)?;
    let params = vec![("a".to_string(), a.clone()), ("b".to_string(), b.clone())];
    let loss = |ca: [f32; 2], cb: f32| -> Result<rumus::Gradients> {
        let la = a.tensor().mul(&RawTensor::from_vec(ca.to_vec(), &[2], &cpu)?)?.sum_all()?;
        let lb = b.tensor().mul_scalar(cb)?.sum_all()?;
        la.add(&lb)?.backward()
    };
    // Gradients (3, 0) and (4): global norm 5.
    let mut grads = loss([3.0, 0.0], 4.0)?;
    let norm = clip_grad_norm(&params, &mut grads, 1.0)?;
    assert!((norm.item()? - 5.0).abs() < 1e-6);
    let ga = grads.get(a.tensor()).unwrap().to_vec()?;
    let gb = grads.get(b.tensor()).unwrap().to_vec()?;
    assert_close(&ga, &[0.6, 0.0], "a");
    assert_close(&gb, &[0.8], "b");
    // Below the limit nothing changes (the coefficient is clamped to 1).
    let mut grads = loss([0.3, 0.0], 0.4)?;
    clip_grad_norm(&params, &mut grads, 1.0)?;
    assert_close(&grads.get(b.tensor()).unwrap().to_vec()?, &[0.4], "unclipped");
    assert!(clip_grad_norm(&params, &mut grads, 0.0).is_err());
    Ok(())
}

/// On wgpu, clipping (one sum-of-squares pass per gradient, one reduction for all) gives the
/// CPU's norm and gradients: parameters of many sizes, one of them tied (listed twice, counted
/// once), one with no gradient, one gradient a transposed view.
#[test]
fn clip_grad_norm_on_wgpu_matches_the_cpu() -> Result<()> {
    let Some(gpu) = rumus::testing::wgpu_or_skip() else { return Ok(()) };
    let shapes: [&[usize]; 5] = [&[300, 7], &[7], &[20_000], &[3, 3, 3], &[1]];
    let run = |device: &Device, max_norm: f32| -> Result<(f32, Vec<Vec<f32>>)> {
        let params: Vec<Param> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| Param::new(RawTensor::randn(s, 0.0, 1.0, k as u64, &Device::cpu())?.to_device(device)?))
            .collect::<Result<_>>()?;
        let unused = Param::new(RawTensor::zeros(&[4], device)?)?;
        let mut named: Vec<(String, Param)> =
            params.iter().enumerate().map(|(k, p)| (format!("p{k}"), p.clone())).collect();
        named.push(("tied".into(), params[0].clone()));
        named.push(("unused".into(), unused));
        let mut loss = RawTensor::zeros(&[], device)?;
        for (k, p) in params.iter().enumerate() {
            let c =
                RawTensor::randn(p.tensor().shape(), 0.0, 0.5, 100 + k as u64, &Device::cpu())?.to_device(device)?;
            // The first parameter is used transposed: its gradient comes back a transposed view.
            let term = match k {
                0 => p.tensor().transpose(0, 1)?.mul(&c.reshape(&[7, 300])?)?,
                _ => p.tensor().mul(&c)?,
            };
            loss = loss.add(&term.sum_all()?)?;
        }
        let mut grads = loss.backward()?;
        let norm = clip_grad_norm(&named, &mut grads, max_norm)?.item()?;
        let clipped = params.iter().map(|p| grads.get(p.tensor()).unwrap().to_vec()).collect::<Result<_>>()?;
        Ok((norm, clipped))
    };
    for max_norm in [1.0, 1e6] {
        let ((norm, want), (got_norm, got)) = (run(&Device::cpu(), max_norm)?, run(&gpu, max_norm)?);
        assert!((got_norm - norm).abs() <= 1e-5 * norm, "norm {got_norm} against the CPU's {norm}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            rumus::testing::assert_close(&format!("gradient {k}, max_norm {max_norm}"), g, w, 1e-5);
        }
    }
    Ok(())
}

fn at(epoch: usize, step: usize) -> Progress {
    Progress { epoch, step, steps_per_epoch: 10, total_steps: 100 }
}

#[test]
fn schedules_match_pytorch_formulas() -> Result<()> {
    let step = StepLr::new(2, 0.1)?;
    let lrs: Vec<f32> = (0..5).map(|e| step.learning_rate(1.0, at(e, e * 10))).collect();
    assert_close(&lrs, &[1.0, 1.0, 0.1, 0.1, 0.01], "step");
    assert!(StepLr::new(0, 0.1).is_err());
    let exp = ExponentialLr { gamma: 0.5 };
    assert_close(&[exp.learning_rate(2.0, at(3, 30))], &[0.25], "exponential");
    let cos = CosineAnnealing { t_max: 10, eta_min: 0.1 };
    assert_close(
        &[cos.learning_rate(1.0, at(0, 0)), cos.learning_rate(1.0, at(5, 50)), cos.learning_rate(1.0, at(10, 100))],
        &[1.0, 0.55, 0.1],
        "cosine",
    );
    let warm = LinearWarmup::new(4).then(StepLr::new(1, 0.5)?);
    let lrs: Vec<f32> = [0, 2, 4, 12].iter().map(|&s| warm.learning_rate(1.0, at(s / 10, s))).collect();
    assert_close(&lrs, &[0.25, 0.625, 1.0, 0.5], "warmup then step");
    // OneCycleLR(max_lr=1, total_steps=100): starts at 1/25, peaks at step 29, ends at 1/25/1e4.
    let one = OneCycle::new(1.0);
    let lrs: Vec<f32> = [0, 29, 99].iter().map(|&s| one.learning_rate(0.0, at(s / 10, s))).collect();
    assert_close(&lrs, &[0.04, 1.0, 4e-6], "one-cycle");
    let mid = one.learning_rate(0.0, at(6, 64));
    assert!(mid < 1.0 && mid > 4e-6);
    Ok(())
}
