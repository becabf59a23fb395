//! `fit` with every kind of loss (issue #30): built-in regression and binary losses, weighted
//! cross-entropy, user-written closures (the same history as the built-in loss they restate),
//! and the checks at fit start (loss against target kind, weights, thresholds, a non-scalar
//! closure result).

use crate::common;

use common::{regression_data, LinReg};
use rumus::nn::{join_name, Linear, Module, Param};
use rumus::prelude::*;
use rumus::{Device, Error, Model, RawTensor, Result, Shape1};

/// A linear classifier of 4 features into 3 classes.
struct Lin3 {
    fc: Linear,
}

impl Module for Lin3 {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "Lin3".into()
    }
}

impl Model for Lin3 {
    type Input = Shape1<4>;
    type Output = Shape1<3>;
}

fn lin3() -> Result<Lin3> {
    Ok(Lin3 { fc: Linear::new(&Device::cpu(), 4, 3, true, 5)? })
}

/// 240 samples labelled by which of three directions their features lean to most.
fn three_classes() -> Result<ClassDataset<Shape1<4>, 3>> {
    let x = RawTensor::randn(&[240, 4], 0.0, 1.0, 9, &Device::cpu())?.to_vec()?;
    let labels = x
        .chunks(4)
        .map(|r| {
            let scores = [r[0] - r[1], r[1] + r[2], r[3] - r[0]];
            (0..3).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap_or(0) as u32
        })
        .collect();
    ClassDataset::new(x, labels)
}

/// `regression_data`'s inputs with the target `1` where `y > 0.1`, else `0`.
fn binary_labels() -> Result<TensorDataset<Shape1<4>, Shape1<1>>> {
    let x = RawTensor::randn(&[256, 4], 0.0, 1.0, 4, &Device::cpu())?.to_vec()?;
    let w = [1.0f32, -2.0, 0.5, 3.0];
    let y = x.chunks(4).map(|r| f32::from(r.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() > 0.0)).collect();
    TensorDataset::new(x, y)
}

fn quiet(epochs: usize) -> Fit<'static> {
    Fit::epochs(epochs).batch_size(32).verbose(Verbosity::Quiet)
}

#[test]
fn regression_losses_train_a_linear_model() -> Result<()> {
    let data = regression_data(256, 1)?;
    for loss in [Loss::L1, Loss::Huber { delta: 1.0 }, Loss::SmoothL1 { beta: 0.5 }] {
        let mut model = LinReg::new(2)?;
        let history = model.fit(&data, quiet(20).optimizer(Adam::new(0.05)).loss(loss.clone()))?;
        let l = history.get("loss").expect("loss");
        assert!(l[19] < l[0] / 10.0, "{loss:?}: loss went {} -> {}", l[0], l[19]);
        let w = model.fc.weight.to_vec()?;
        for (got, want) in w.iter().zip([1.0, -2.0, 0.5, 3.0]) {
            assert!((got - want).abs() < 0.1, "{loss:?}: weights {w:?}");
        }
    }
    Ok(())
}

#[test]
fn binary_cross_entropy_with_logits_and_pos_weight_learns_a_label() -> Result<()> {
    let data = binary_labels()?;
    let mut model = LinReg::new(3)?;
    let loss = Loss::BceWithLogits { pos_weight: Some(vec![2.0]) };
    let history = model.fit(&data, quiet(15).optimizer(Adam::new(0.05)).loss(loss))?;
    let l = history.get("loss").expect("loss");
    assert!(l[14] < l[0] / 3.0, "loss went {} -> {}", l[0], l[14]);
    Ok(())
}

#[test]
fn a_closure_loss_trains_exactly_like_the_builtin_loss_it_restates() -> Result<()> {
    let data = regression_data(128, 2)?;
    let run = |cfg: Fit| -> Result<Vec<f32>> {
        let mut model = LinReg::new(6)?;
        Ok(model.fit(&data, cfg)?.get("loss").expect("loss").to_vec())
    };
    let builtin = run(quiet(4).optimizer(Sgd::new(0.05)).loss(Loss::Mse))?;
    let closure = run(quiet(4).optimizer(Sgd::new(0.05)).loss_fn(|outputs, targets| {
        let diff = outputs.sub(targets)?;
        diff.mul(&diff)?.mean_all()
    }))?;
    assert_eq!(builtin, closure);

    let classes = three_classes()?;
    let run = |cfg: Fit| -> Result<Vec<f32>> { Ok(lin3()?.fit(&classes, cfg)?.get("loss").expect("loss").to_vec()) };
    let builtin = run(quiet(3).optimizer(Sgd::new(0.1)).loss(Loss::cross_entropy()))?;
    let closure = run(quiet(3).optimizer(Sgd::new(0.1)).loss_fn(|logits, targets| logits.cross_entropy(targets, 0.0)))?;
    assert_eq!(builtin, closure);
    Ok(())
}

#[test]
fn weighted_cross_entropy_trains_a_classifier() -> Result<()> {
    let data = three_classes()?;
    let mut model = lin3()?;
    let loss =
        Loss::WeightedCrossEntropy { weight: Some(vec![1.0, 2.0, 0.5]), ignore_index: None, label_smoothing: 0.05 };
    let history = model.fit(&data, quiet(15).optimizer(Adam::new(0.05)).loss(loss))?;
    let accuracy = history.last("accuracy").expect("accuracy");
    assert!(accuracy > 0.85, "accuracy {accuracy}");
    let l = history.get("loss").expect("loss");
    assert!(l[14] < l[0] / 2.0, "loss went {} -> {}", l[0], l[14]);
    Ok(())
}

#[test]
fn losses_are_checked_against_the_targets_when_fit_starts() -> Result<()> {
    let regression = regression_data(32, 3)?;
    let classes = three_classes()?;
    let invalid = |r: Result<History>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{what}: {r:?}");
    };
    let mut reg = LinReg::new(1)?;
    for loss in [
        Loss::cross_entropy(),
        Loss::weighted_cross_entropy(vec![1.0]),
        Loss::Huber { delta: 0.0 },
        Loss::SmoothL1 { beta: -0.5 },
        Loss::BceWithLogits { pos_weight: Some(vec![1.0, 2.0]) },
    ] {
        invalid(reg.fit(&regression, quiet(1).loss(loss.clone())), &format!("{loss:?} on regression targets"));
    }
    let mut cls = lin3()?;
    for loss in [
        Loss::Mse,
        Loss::L1,
        Loss::Bce,
        Loss::BceWithLogits { pos_weight: None },
        Loss::KlDiv { log_target: false },
        Loss::weighted_cross_entropy(vec![1.0, 1.0]),
        Loss::weighted_cross_entropy(vec![1.0, -1.0, 1.0]),
        Loss::weighted_cross_entropy(vec![1.0, f32::NAN, 1.0]),
        Loss::WeightedCrossEntropy { weight: None, ignore_index: Some(7), label_smoothing: 1.5 },
    ] {
        invalid(cls.fit(&classes, quiet(1).loss(loss.clone())), &format!("{loss:?} on class targets"));
    }
    // A closure's result must be one value.
    let r = reg.fit(&regression, quiet(1).loss_fn(|outputs, targets| outputs.sub(targets)));
    assert!(matches!(r, Err(Error::Shape { .. })), "a non-scalar closure loss: {r:?}");
    Ok(())
}
