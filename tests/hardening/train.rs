//! Hardening of training (issue #27): accuracy with tied logits, tied parameters, parameters
//! versus buffers, stable label smoothing, non-finite weights after the last step, inference
//! without `&mut`, and `ModelCheckpoint` templates.

use crate::common;

use proptest::prelude::*;
use rumus::nn::{
    count_trainable, join_name, named_buffers, named_parameters, named_params, BatchNorm1d, Linear, Module, Param,
};
use rumus::optim::clip_grad_norm;
use rumus::prelude::*;
use rumus::train::{evaluate_with, EvalSettings, Logs};
use rumus::Gradients;

use common::{regression_data, weights, LinReg};

// ---------------------------------------------------------------------------------------------
// Accuracy: ties go to the first index, as PyTorch's argmax.

/// Outputs its input: the dataset's rows are the logits.
struct Identity4;

impl Module for Identity4 {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        Ok(x.clone())
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        "Identity4".into()
    }
}

impl Model for Identity4 {
    type Input = Shape1<4>;
    type Output = Shape1<4>;
}

/// Linear(4 => 3) with every weight and bias zero: all logits tie.
struct Zero3 {
    fc: Linear,
}

impl Module for Zero3 {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "Zero3".into()
    }
}

impl Model for Zero3 {
    type Input = Shape1<4>;
    type Output = Shape1<3>;
}

#[test]
fn a_model_with_all_zero_weights_is_not_perfectly_accurate() -> Result<()> {
    let model = Zero3 { fc: Linear::new(&Device::cpu(), 4, 3, true, 0)? };
    for (_, p) in named_params(&model) {
        p.assign(&RawTensor::zeros(p.shape(), &Device::cpu())?)?;
    }
    let labels = vec![0, 1, 2, 2, 1, 0, 2, 2];
    let x = RawTensor::randn(&[8, 4], 0.0, 1.0, 3, &Device::cpu())?.to_vec()?;
    let data = ClassDataset::<Shape1<4>, 3>::new(x, labels)?;
    let settings = EvalSettings { top_k: Some(2), ..EvalSettings::default() };
    let eval = evaluate_with(&model, &data, &settings)?;
    // Every argmax is class 0 (the first of the tied logits): 2 of 8 labels.
    assert_eq!(eval.accuracy, 0.25);
    // Top-2 under the same rule is {0, 1}: 4 of 8.
    assert_eq!(eval.top_k_accuracy, Some(0.5));
    assert!((eval.loss - 3f32.ln()).abs() < 1e-6, "{}", eval.loss);
    Ok(())
}

/// The target's place with ties broken by index (first wins), on the host.
fn host_rank(row: &[f32], target: usize) -> usize {
    let t = row[target];
    row.iter().enumerate().filter(|&(j, &v)| v > t || (v == t && j < target)).count()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn accuracy_and_top_k_match_first_index_argmax(
        rows in proptest::collection::vec((proptest::collection::vec(0u8..3, 4), 0u32..4), 1..40),
    ) {
        let logits: Vec<f32> = rows.iter().flat_map(|(r, _)| r.iter().map(|&v| v as f32)).collect();
        let labels: Vec<u32> = rows.iter().map(|&(_, l)| l).collect();
        let data = ClassDataset::<Shape1<4>, 4>::new(logits.clone(), labels.clone()).unwrap();
        let settings = EvalSettings { batch_size: 7, top_k: Some(2), ..EvalSettings::default() };
        let eval = evaluate_with(&Identity4, &data, &settings).unwrap();
        let ranks: Vec<usize> = logits.chunks(4).zip(&labels).map(|(r, &t)| host_rank(r, t as usize)).collect();
        let n = labels.len() as f32;
        let top1 = ranks.iter().filter(|&&r| r == 0).count() as f32 / n;
        let top2 = ranks.iter().filter(|&&r| r < 2).count() as f32 / n;
        prop_assert!((eval.accuracy - top1).abs() < 1e-6, "{} vs {}", eval.accuracy, top1);
        prop_assert!((eval.top_k_accuracy.unwrap() - top2).abs() < 1e-6);
    }
}

// ---------------------------------------------------------------------------------------------
// Tied parameters: one tensor under two names is stepped, decayed and clipped once.

/// `y = (x · Wᵀ) · Wᵀ` with one weight visited as `encoder.weight` and `decoder.weight`.
struct Tied {
    weight: Param,
}

impl Module for Tied {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let wt = self.weight.tensor().transpose(0, 1)?;
        x.matmul(&wt)?.matmul(&wt)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "encoder.weight"), &self.weight);
        visitor(&join_name(prefix, "decoder.weight"), &self.weight);
    }
    fn describe(&self) -> String {
        "Tied".into()
    }
}

fn tied() -> Result<(Tied, Gradients)> {
    let w = RawTensor::from_vec(vec![0.5, -0.25, 0.75, 1.0], &[2, 2], &Device::cpu())?;
    let model = Tied { weight: Param::new(w)? };
    let x = RawTensor::from_vec(vec![1.0, 2.0, -1.0, 0.5], &[2, 2], &Device::cpu())?;
    let grads = model.forward_raw(&x)?.sum_all()?.backward()?;
    Ok((model, grads))
}

#[test]
fn a_tied_weight_is_listed_stepped_and_clipped_once() -> Result<()> {
    let (model, grads) = tied()?;
    assert_eq!(named_params(&model).len(), 2, "checkpoints keep both names");
    let names: Vec<String> = named_parameters(&model).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["encoder.weight"]);
    assert_eq!(count_trainable(&model), 4);

    let w0 = model.weight.to_vec()?;
    let g = grads.get(model.weight.tensor()).unwrap().to_vec()?;
    let mut sgd = Sgd::new(0.1).weight_decay(0.01);
    sgd.step(&named_params(&model), &grads)?;
    let want: Vec<f32> = w0.iter().zip(&g).map(|(w, g)| w - 0.1 * (g + 0.01 * w)).collect();
    let got = model.weight.to_vec()?;
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-6, "stepped twice? {got:?} vs {want:?}");
    }
    let mut adam = Adam::new(0.1);
    adam.step(&named_params(&model), &grads)?;
    assert_eq!(adam.state()?.steps.into_iter().collect::<Vec<_>>(), [("encoder.weight".to_string(), 1)]);

    let (model, mut grads) = tied()?;
    let g = grads.get(model.weight.tensor()).unwrap().to_vec()?;
    let norm = g.iter().map(|v| v * v).sum::<f32>().sqrt();
    let got = clip_grad_norm(&named_params(&model), &mut grads, 0.5)?.item()?;
    assert!((got - norm).abs() < 1e-5 * norm, "norm {got}, want {norm} (counted once)");
    let scale = 0.5 / (norm + 1e-6);
    let clipped = grads.get(model.weight.tensor()).unwrap().to_vec()?;
    for (c, g) in clipped.iter().zip(&g) {
        assert!((c - g * scale).abs() < 1e-6, "scaled twice? {clipped:?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Parameters versus buffers.

#[test]
fn parameters_exclude_buffers_and_buffers_are_listed_apart() -> Result<()> {
    let bn = BatchNorm1d::new(&Device::cpu(), 3, 1e-5, 0.1)?;
    let names = |v: Vec<(String, Param)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(names(named_parameters(&bn)), ["weight", "bias"]);
    assert_eq!(names(named_buffers(&bn)), ["running_mean", "running_var"]);
    assert_eq!(names(named_params(&bn)), ["weight", "bias", "running_mean", "running_var"]);
    assert_eq!(count_trainable(&bn), 6);
    Ok(())
}

#[model(input = [6])]
pub struct Normed {
    body: layers![Linear(8), BatchNorm1d, Dropout(0.5), Linear(3)],
}

#[test]
fn generated_parameters_and_buffers_split_like_pytorch() -> Result<()> {
    let model = Normed::new(&Device::cpu(), 0)?;
    let names = |v: Vec<(String, Param)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(
        names(model.named_parameters()),
        ["body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias", "body.3.weight", "body.3.bias"]
    );
    assert_eq!(names(model.named_buffers()), ["body.1.running_mean", "body.1.running_var"]);
    assert_eq!(model.parameters().len(), 6);
    assert_eq!(model.buffers().len(), 2);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Inference without `&mut`.

fn normed_data() -> Result<ClassDataset<Shape1<6>, 3>> {
    let x = RawTensor::randn(&[10, 6], 0.0, 1.0, 5, &Device::cpu())?.to_vec()?;
    ClassDataset::new(x, (0..10).map(|i| i % 3).collect())
}

#[test]
fn evaluate_and_predict_take_a_shared_model_and_change_nothing() -> Result<()> {
    let model = Normed::new(&Device::cpu(), 2)?; // training mode, immutable binding
    let data = normed_data()?;
    let x = Tensor::<Shape1<6>>::randn(4, 9, &Device::cpu())?;
    let before = weights(&model);
    let first = model.evaluate(&data)?;
    let second = model.evaluate(&data)?;
    let p1 = model.predict(&x)?.into_raw().to_vec()?;
    let p2 = model.predict(&x)?.into_raw().to_vec()?;
    assert_eq!(first, second, "dropout or batch statistics leaked into evaluate");
    assert_eq!(p1, p2);
    assert_eq!(weights(&model), before, "evaluate/predict changed the running statistics");

    // The same numbers as a model switched to eval mode.
    let mut reference = Normed::new(&Device::cpu(), 2)?;
    reference.eval();
    assert_eq!(reference.forward(&x)?.into_raw().to_vec()?, p1);
    assert_eq!(rumus::train::evaluate(&reference, &data)?, first);

    // The model's own mode is unchanged: a training forward still updates the statistics.
    model.forward(&x)?;
    assert_ne!(weights(&model), before, "the model was left in eval mode");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Label smoothing at any logit magnitude.

#[test]
fn smoothed_cross_entropy_of_equal_huge_logits_is_log_classes() -> Result<()> {
    let d = Device::cpu();
    let targets = RawTensor::from_indices(&[3, 7], &[2], &d)?;
    for value in [1e30f32, -1e30, 3e38, 0.0] {
        let logits = RawTensor::full(value, &[2, 10], &d)?;
        for s in [0.0, 0.1, 0.9] {
            let loss = logits.cross_entropy(&targets, s)?.item()?;
            assert!((loss - 10f32.ln()).abs() < 1e-5, "logits {value}, smoothing {s}: {loss}");
        }
    }
    Ok(())
}

/// Reference smoothed cross-entropy in f64, stable.
fn reference_ce(logits: &[f32], classes: usize, targets: &[u32], s: f64) -> f64 {
    let rows = logits.chunks(classes).zip(targets).map(|(r, &t)| {
        let r: Vec<f64> = r.iter().map(|&v| v as f64).collect();
        let max = r.iter().cloned().fold(f64::MIN, f64::max);
        let lse = r.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        let nll = lse - (r[t as usize] - max);
        let uniform = lse - r.iter().map(|v| v - max).sum::<f64>() / classes as f64;
        (1.0 - s) * nll + s * uniform
    });
    rows.sum::<f64>() / targets.len() as f64
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn smoothed_cross_entropy_is_exact_and_shift_invariant(
        classes in 2usize..12,
        raw in proptest::collection::vec(-30f32..30.0, 48),
        picks in proptest::collection::vec(any::<u32>(), 4),
        offset in prop_oneof![Just(0f32), Just(1e6), Just(1e20), Just(1e30), Just(-1e30)],
        s in 0.0f32..0.99,
    ) {
        let rows = 4;
        let logits: Vec<f32> = raw[..rows * classes].iter().map(|v| v + offset).collect();
        let targets: Vec<u32> = picks.iter().map(|p| p % classes as u32).collect();
        let d = Device::cpu();
        let x = RawTensor::from_vec(logits.clone(), &[rows, classes], &d).unwrap();
        let t = RawTensor::from_indices(&targets, &[rows], &d).unwrap();
        let got = x.cross_entropy(&t, s).unwrap().item().unwrap() as f64;
        let want = reference_ce(&logits, classes, &targets, s as f64);
        prop_assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "got {} want {}", got, want);
    }
}

// ---------------------------------------------------------------------------------------------
// Non-finite weights after the last step.

/// One step per epoch with a learning rate that sends the weights to infinity, from a loss
/// (computed before the step) that is finite.
fn exploding_fit() -> Fit<'static> {
    Fit::epochs(1).batch_size(64).no_shuffle().optimizer(Sgd::new(1e38)).verbose(Verbosity::Quiet)
}

#[test]
fn fit_fails_when_the_last_step_makes_the_weights_infinite() -> Result<()> {
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let err = model.fit(&data, exploding_fit()).unwrap_err();
    assert!(matches!(err, Error::NonFinite(_)), "{err:?}");
    assert!(err.to_string().contains("weights"), "{err}");
    assert!(weights(&model).iter().flat_map(|(_, v)| v).any(|v| !v.is_finite()), "the step did not blow up");

    let mut model = LinReg::new(4)?;
    let good = weights(&model);
    let err = model.fit(&data, exploding_fit().callback(TerminateOnNaN::new())).unwrap_err();
    assert!(matches!(err, Error::Training(_)), "{err:?}");
    assert_eq!(weights(&model), good, "TerminateOnNaN must restore the weights of the epoch's start");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ModelCheckpoint templates are parsed up front.

#[test]
fn bad_checkpoint_templates_are_errors_not_panics() {
    for template in [
        "ckpt-{epoch:99999999999}.safetensors",
        "ckpt-{epoch:99999999999999999999999}.safetensors",
        "{epoch:65}",
        "{epoch:-1}",
        "{epoch:x}",
        "{epoch:1e3}",
        "{loss:.99}",
        "{loss:.}",
        "{loss:5}",
        "{epoch",
        "ckpt-{",
        "a}b",
        "{}",
        "{nope}",
        "{val_nope}",
        "{top_accuracy}",
    ] {
        let err = ModelCheckpoint::new(template).err().unwrap_or_else(|| panic!("{template:?} was accepted"));
        assert!(matches!(err, Error::InvalidArgument { .. }), "{template:?}: {err:?}");
        assert!(err.to_string().contains("template"), "{err}");
    }
}

#[test]
fn good_checkpoint_templates_fill_in() -> Result<()> {
    let mut logs = Logs::new();
    logs.insert("loss", 0.5);
    logs.insert("val_loss", 0.12345);
    logs.insert("val_top5_accuracy", 0.75);
    let cases = [
        ("ckpt-{epoch:02d}-{val_loss:.2f}.st", "ckpt-03-0.12.st"),
        ("e{epoch}-{loss}", "e3-0.5"),
        ("{{x}}-{epoch:3}", "{x}-003"),
        ("{val_top5_accuracy:.1}", "0.8"),
        ("plain.safetensors", "plain.safetensors"),
    ];
    for (template, want) in cases {
        assert_eq!(ModelCheckpoint::new(template)?.file_name(2, &logs)?, want, "{template}");
    }
    // A known metric the logs lack is reported when filling.
    let err = ModelCheckpoint::new("{val_accuracy}")?.file_name(0, &logs).unwrap_err();
    assert!(err.to_string().contains("val_accuracy"), "{err}");
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn any_template_parses_or_errs_and_fills_without_panicking(
        template in "[a-z_{}:.0-9d]{0,24}",
        epoch in any::<usize>(),
    ) {
        let mut logs = Logs::new();
        for name in ["loss", "accuracy", "lr", "val_loss", "val_accuracy", "top3_accuracy"] {
            logs.insert(name, 0.25);
        }
        if let Ok(checkpoint) = ModelCheckpoint::new(&template) {
            if let Ok(name) = checkpoint.file_name(epoch, &logs) {
                prop_assert!(name.len() <= template.len() * 64 + 64);
            }
        }
    }
}

/// `cases` cases, no regression files written beside the tests.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}
