//! Issue #30's metrics: top-k, precision, recall, F1, the confusion matrix and MAE computed on
//! the device during `fit` and `evaluate`, against host references on the CPU and wgpu; their
//! checks against the targets; per-class values and the confusion matrix in `History`.

use crate::common;

use common::{regression_data, scratch, LinReg};
use proptest::prelude::*;
use rumus::data::ClassDataset;
use rumus::nn::{join_name, Linear, Module, Param};
use rumus::prelude::*;
use rumus::train::{evaluate_with, ConfusionMatrix, EvalSettings, Metric};

const CLASSES: usize = 5;

/// Linear(4 => 5) logits.
struct Probe {
    fc: Linear,
}

impl Probe {
    fn new(device: &Device, seed: u64) -> Result<Self> {
        Ok(Probe { fc: Linear::new(device, 4, CLASSES, true, seed)? })
    }
}

impl Module for Probe {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "Probe".into()
    }
}

impl Model for Probe {
    type Input = Shape1<4>;
    type Output = Shape1<CLASSES>;
}

/// `n` points whose class is mostly the index of their largest coordinate (class 4 never).
fn points(n: usize, seed: u64) -> Result<ClassDataset<Shape1<4>, CLASSES>> {
    let x = RawTensor::randn(&[n, 4], 0.0, 1.0, seed, &Device::cpu())?.to_vec()?;
    let labels = x
        .chunks(4)
        .enumerate()
        .map(|(i, row)| {
            let best = (0..4).fold(0, |b, j| if row[j] > row[b] { j } else { b });
            if i % 7 == 0 {
                ((best + 1) % 4) as u32
            } else {
                best as u32
            }
        })
        .collect();
    ClassDataset::new(x, labels)
}

/// Everything the metrics need, computed on the host from the model's logits: the confusion
/// counts (first largest logit on ties) and the top-2 accuracy.
fn host_reference(model: &Probe, data: &ClassDataset<Shape1<4>, CLASSES>) -> Result<(Vec<u64>, f32)> {
    let indices: Vec<usize> = (0..data.len()).collect();
    let (inputs, targets) = data.get_batch(&indices, &model_device(model))?;
    let logits = model.predict(&inputs)?.raw().to_vec()?;
    let targets = targets.to_vec_u32()?;
    let mut confusion = vec![0u64; CLASSES * CLASSES];
    let mut top2 = 0;
    for (row, &t) in logits.chunks(CLASSES).zip(&targets) {
        let argmax = (0..CLASSES).fold(0, |b, j| if row[j] > row[b] { j } else { b });
        confusion[t as usize * CLASSES + argmax] += 1;
        let above = (0..CLASSES).filter(|&j| row[j] > row[t as usize] || (row[j] == row[t as usize] && j < t as usize));
        if above.count() < 2 {
            top2 += 1;
        }
    }
    Ok((confusion, top2 as f32 / targets.len() as f32))
}

fn model_device(model: &Probe) -> Device {
    model.fc.weight.tensor().device().clone()
}

/// Macro precision, recall, F1 over the classes present in targets or predictions
/// (scikit-learn's `average="macro", zero_division=0`), written out independently.
fn host_macro(confusion: &[u64]) -> (f32, f32, f32) {
    let c = CLASSES;
    let (mut p, mut r, mut f, mut present) = (0.0f64, 0.0f64, 0.0f64, 0);
    for k in 0..c {
        let tp = confusion[k * c + k] as f64;
        let predicted: u64 = (0..c).map(|t| confusion[t * c + k]).sum();
        let actual: u64 = confusion[k * c..(k + 1) * c].iter().sum();
        if predicted + actual == 0 {
            continue;
        }
        present += 1;
        let precision = if predicted == 0 { 0.0 } else { tp / predicted as f64 };
        let recall = if actual == 0 { 0.0 } else { tp / actual as f64 };
        p += precision;
        r += recall;
        f += if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
    }
    let n = present as f64;
    ((p / n) as f32, (r / n) as f32, (f / n) as f32)
}

fn all_metrics() -> Vec<Metric> {
    vec![Metric::Precision, Metric::Recall, Metric::F1, Metric::TopK(2), Metric::ConfusionMatrix]
}

fn check_against_host(device: &Device) -> Result<()> {
    let data = points(203, 4)?;
    let model = Probe::new(device, 9)?;
    let (confusion, top2) = host_reference(&model, &data)?;
    // Batches of 64 leave a last batch of 11: the counts add up across batches.
    let settings = EvalSettings { batch_size: 64, metrics: all_metrics(), ..EvalSettings::default() };
    let eval = evaluate_with(&model, &data, &settings)?;
    let matrix = eval.confusion_matrix.clone().expect("asked for");
    assert_eq!(matrix.counts(), confusion, "on {device:?}:\n{matrix}");
    let (p, r, f) = host_macro(&confusion);
    for (name, want) in [("precision", p), ("recall", r), ("f1", f), ("top2_accuracy", top2)] {
        let got = eval.metrics.get(name).unwrap();
        assert!((got - want).abs() < 1e-6, "{name} on {device:?}: {got}, by hand {want}");
    }
    assert_eq!(eval.top_k_accuracy, Some(eval.metrics.get("top2_accuracy").unwrap()));
    let counts = eval.class_counts.expect("asked for");
    assert_eq!(counts, matrix.class_counts());
    assert_eq!(counts.actual().iter().sum::<u64>(), 203);
    // Without the confusion matrix the per-class counts are summed by index (bincount).
    let per_class = vec![Metric::Precision, Metric::Recall, Metric::F1];
    let settings = EvalSettings { batch_size: 64, metrics: per_class, ..EvalSettings::default() };
    let alone = evaluate_with(&model, &data, &settings)?;
    assert_eq!(alone.class_counts.as_ref(), Some(&counts), "on {device:?}");
    assert!(alone.confusion_matrix.is_none());
    Ok(())
}

#[test]
fn evaluate_metrics_equal_a_host_computation_on_cpu() -> Result<()> {
    check_against_host(&Device::cpu())
}

#[test]
fn evaluate_metrics_equal_a_host_computation_on_wgpu() -> Result<()> {
    let Some(device) = rumus::testing::wgpu_or_skip() else {
        return Ok(());
    };
    check_against_host(&device)
}

#[test]
fn fit_logs_the_chosen_metrics_and_keeps_per_class_values_and_the_confusion_matrix_on_cpu() -> Result<()> {
    fit_with_metrics(&Device::cpu())
}

#[test]
fn fit_logs_the_chosen_metrics_and_keeps_per_class_values_and_the_confusion_matrix_on_wgpu() -> Result<()> {
    let Some(device) = rumus::testing::wgpu_or_skip() else {
        return Ok(());
    };
    fit_with_metrics(&device)
}

fn fit_with_metrics(device: &Device) -> Result<()> {
    let (train, test) = (points(160, 1)?, points(60, 2)?);
    let mut model = Probe::new(device, 3)?;
    let history = model.fit(
        &train,
        Fit::epochs(3)
            .batch_size(32)
            .optimizer(Adam::new(0.05))
            .metrics([Metric::F1, Metric::Precision, Metric::Recall, Metric::ConfusionMatrix])
            .top_k(2)
            .validation(&test)
            .verbose(Verbosity::Quiet),
    )?;
    let names: Vec<&str> = history.names().collect();
    assert_eq!(
        names,
        [
            "loss",
            "accuracy",
            "top2_accuracy",
            "precision",
            "recall",
            "f1",
            "val_loss",
            "val_accuracy",
            "val_top2_accuracy",
            "val_precision",
            "val_recall",
            "val_f1",
            "lr"
        ]
    );
    // The last epoch's validation values are an evaluation of the final model.
    let settings = EvalSettings { metrics: all_metrics(), ..EvalSettings::default() };
    let eval = evaluate_with(&model, &test, &settings)?;
    for name in ["precision", "recall", "f1", "top2_accuracy"] {
        let (logged, evaluated) = (history.last(&format!("val_{name}")).unwrap(), eval.metrics.get(name).unwrap());
        assert!((logged - evaluated).abs() < 1e-6, "{name}: {logged} vs {evaluated}");
    }
    assert_eq!(history.val_confusion_matrix(), eval.confusion_matrix.as_ref());
    let train_matrix = history.confusion_matrix().expect("asked for");
    assert_eq!(train_matrix.counts().iter().sum::<u64>(), 160);
    // Per class: one list per epoch, one value per class, whose macro mean is the logged value.
    let f1 = history.per_class("val_f1").unwrap();
    assert_eq!((f1.len(), f1[2].len()), (3, CLASSES));
    assert_eq!(f1[2], eval.class_counts.as_ref().unwrap().f1());
    assert_eq!(history.class_counts(true).unwrap().len(), 3);
    assert!(history.per_class("accuracy").is_none());
    Ok(())
}

#[test]
fn a_class_never_predicted_has_precision_zero_and_counts_in_the_macro_mean() -> Result<()> {
    let data = points(50, 5)?;
    let model = Probe::new(&Device::cpu(), 1)?;
    // Zero weights and a bias favouring class 0: every prediction is class 0.
    model.fc.weight.assign(&RawTensor::zeros(&[CLASSES, 4], &Device::cpu())?)?;
    model.fc.bias.as_ref().unwrap().assign(&RawTensor::from_vec(
        vec![1.0, 0.0, 0.0, 0.0, 0.0],
        &[CLASSES],
        &Device::cpu(),
    )?)?;
    let eval = evaluate_with(&model, &data, &EvalSettings { metrics: all_metrics(), ..EvalSettings::default() })?;
    let counts = eval.class_counts.unwrap();
    let support = counts.actual().to_vec();
    assert_eq!(counts.predicted(), [50, 0, 0, 0, 0]);
    let p0 = support[0] as f32 / 50.0;
    assert_eq!(counts.precision(), [p0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(counts.recall(), [1.0, 0.0, 0.0, 0.0, 0.0]);
    // Class 4 is neither a target nor predicted: left out of the macro means (4 classes).
    assert_eq!(support[4], 0);
    assert!((eval.metrics.get("precision").unwrap() - p0 / 4.0).abs() < 1e-7);
    assert!((eval.metrics.get("recall").unwrap() - 0.25).abs() < 1e-7);
    let f0 = 2.0 * support[0] as f32 / (50.0 + support[0] as f32);
    assert!((eval.metrics.get("f1").unwrap() - f0 / 4.0).abs() < 1e-6);
    Ok(())
}

#[test]
fn mae_is_the_mean_absolute_error_on_cpu_and_wgpu() -> Result<()> {
    let data = regression_data(70, 2)?;
    let model = LinReg::new(5)?;
    let indices: Vec<usize> = (0..70).collect();
    let (inputs, targets) = data.get_batch(&indices, &Device::cpu())?;
    let predicted = model.predict(&inputs)?.raw().to_vec()?;
    let want = predicted.iter().zip(targets.to_vec()?).map(|(p, t)| (p - t).abs() as f64).sum::<f64>() / 70.0;
    let settings = EvalSettings { batch_size: 32, metrics: vec![Metric::Mae], ..EvalSettings::default() };
    let cpu = evaluate_with(&model, &data, &settings)?.metrics.get("mae").unwrap();
    assert!((cpu as f64 - want).abs() < 1e-5, "mae {cpu}, by hand {want}");
    let mut trained = LinReg::new(5)?;
    let history =
        trained.fit(&data, Fit::epochs(2).metrics([Metric::Mae]).validation_split(0.2).verbose(Verbosity::Quiet))?;
    assert_eq!(history.names().collect::<Vec<_>>(), ["loss", "mae", "val_loss", "val_mae", "lr"]);
    if let Some(device) = rumus::testing::wgpu_or_skip() {
        let on_gpu = LinReg { fc: Linear::new(&device, 4, 1, true, 5)? };
        on_gpu.fc.weight.assign(&model.fc.weight.tensor().to_device(&device)?)?;
        on_gpu.fc.bias.as_ref().unwrap().assign(&model.fc.bias.as_ref().unwrap().tensor().to_device(&device)?)?;
        let gpu = evaluate_with(&on_gpu, &data, &settings)?.metrics.get("mae").unwrap();
        assert!((gpu - cpu).abs() < 1e-5, "mae {gpu} on wgpu, {cpu} on the cpu");
    }
    Ok(())
}

#[test]
fn metrics_that_do_not_fit_the_targets_are_errors_before_training() -> Result<()> {
    let classes = points(40, 1)?;
    let mut model = Probe::new(&Device::cpu(), 3)?;
    let before = common::weights(&model);
    for (metrics, want) in [
        (vec![Metric::Mae], "needs regression targets"),
        (vec![Metric::TopK(6)], "between 1 and the number of classes, 5"),
        (vec![Metric::TopK(0)], "between 1"),
    ] {
        let err = model.fit(&classes, Fit::epochs(1).metrics(metrics).verbose(Verbosity::Quiet)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }) && err.to_string().contains(want), "{err}");
    }
    assert!(model.fit(&classes, Fit::epochs(1).top_k(0).verbose(Verbosity::Quiet)).is_err());
    assert_eq!(common::weights(&model), before, "a rejected fit must not train");
    let values = regression_data(40, 1)?;
    let mut linear = LinReg::new(1)?;
    for metric in [Metric::F1, Metric::Precision, Metric::ConfusionMatrix, Metric::TopK(1), Metric::Accuracy] {
        let err = linear.fit(&values, Fit::epochs(1).metrics([metric]).verbose(Verbosity::Quiet)).unwrap_err();
        assert!(err.to_string().contains("needs class targets"), "{metric:?}: {err}");
        let settings = EvalSettings { metrics: vec![metric], ..EvalSettings::default() };
        assert!(evaluate_with(&linear, &values, &settings).is_err());
    }
    Ok(())
}

#[test]
fn a_confusion_matrix_prints_aligned_and_draws_an_svg() -> Result<()> {
    let matrix = ConfusionMatrix::new(3, vec![12, 1, 0, 3, 140, 2, 0, 0, 7]).unwrap();
    let text = matrix.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        ["true\\pred   0   1   2", "        0  12   1   0", "        1   3 140   2", "        2   0   0   7"]
    );
    assert!(matrix.clone().with_labels(["a", "b"]).is_err());
    let named = matrix.with_labels(["cat", "dog", "emu"])?;
    assert!(named.to_string().starts_with("true\\pred cat dog emu\n      cat  12   1   0"), "{named}");
    let path = scratch("confusion_svg").join("m.svg");
    named.to_svg(&path)?;
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("<svg") && svg.contains("140") && svg.contains("emu") && svg.contains("predicted"));
    ConfusionMatrix::new(1, vec![4]).unwrap().to_svg(path.with_file_name("one.svg"))?;
    Ok(())
}

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

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Tied logits (values 0..3) go to the first index; the per-class counts accumulated on their
    /// own (`[3, classes]`) equal those of the confusion matrix, which equals a host count.
    #[test]
    fn per_class_counts_with_and_without_the_confusion_matrix_match_a_host_count(
        rows in proptest::collection::vec((proptest::collection::vec(0u8..3, 4), 0u32..4), 1..40),
        batch_size in 1usize..9,
    ) {
        let logits: Vec<f32> = rows.iter().flat_map(|(r, _)| r.iter().map(|&v| v as f32)).collect();
        let labels: Vec<u32> = rows.iter().map(|&(_, l)| l).collect();
        let data = ClassDataset::<Shape1<4>, 4>::new(logits.clone(), labels.clone()).unwrap();
        let mut want = vec![0u64; 16];
        for (row, &t) in logits.chunks(4).zip(&labels) {
            let argmax = (0..4).fold(0, |b, j| if row[j] > row[b] { j } else { b });
            want[t as usize * 4 + argmax] += 1;
        }
        let prf = vec![Metric::Precision, Metric::Recall, Metric::F1];
        let alone = EvalSettings { batch_size, metrics: prf.clone(), ..EvalSettings::default() };
        let alone = evaluate_with(&Identity4, &data, &alone).unwrap();
        let with_matrix = EvalSettings {
            batch_size,
            metrics: [prf, vec![Metric::ConfusionMatrix]].concat(),
            ..EvalSettings::default()
        };
        let with_matrix = evaluate_with(&Identity4, &data, &with_matrix).unwrap();
        let matrix = with_matrix.confusion_matrix.clone().unwrap();
        prop_assert_eq!(matrix.counts(), want.as_slice());
        prop_assert_eq!(alone.class_counts.as_ref(), Some(&matrix.class_counts()));
        prop_assert_eq!(&alone.metrics, &with_matrix.metrics);
        prop_assert!(alone.confusion_matrix.is_none());
    }

    /// Any k: top-k is an error exactly when k is 0 or above the class count, never a panic.
    #[test]
    fn top_k_is_checked_against_the_classes(k in 0usize..40, via_shorthand in any::<bool>()) {
        let data = points(8, 1).unwrap();
        let model = Probe::new(&Device::cpu(), 1).unwrap();
        let settings = if via_shorthand {
            EvalSettings { top_k: Some(k), ..EvalSettings::default() }
        } else {
            EvalSettings { metrics: vec![Metric::TopK(k)], ..EvalSettings::default() }
        };
        match evaluate_with(&model, &data, &settings) {
            Ok(eval) => {
                prop_assert!((1..=CLASSES).contains(&k));
                let got = eval.metrics.get(&format!("top{k}_accuracy")).unwrap();
                prop_assert!(got >= eval.accuracy && (k < CLASSES || got == 1.0));
            }
            Err(e) => {
                prop_assert!(k == 0 || k > CLASSES);
                prop_assert!(matches!(e, Error::InvalidArgument { op: "evaluate", .. }), "{}", e);
            }
        }
    }
}

/// Device → host reads of a quiet `fit` of 2 epochs on wgpu with `metrics`.
fn reads_of_fit(
    device: &Device,
    data: &ClassDataset<Shape1<4>, CLASSES>,
    metrics: Vec<Metric>,
    batch: usize,
) -> Result<u64> {
    let mut model = Probe::new(device, 3)?;
    let before = rumus::backend::wgpu::transfer_count();
    model.fit(data, Fit::epochs(2).batch_size(batch).metrics(metrics).verbose(Verbosity::Quiet))?;
    Ok(rumus::backend::wgpu::transfer_count() - before)
}

#[test]
fn metrics_add_no_device_read_per_step_on_wgpu() -> Result<()> {
    if !common::in_child() {
        common::run_child(&common::test_path(module_path!(), "metrics_add_no_device_read_per_step_on_wgpu"), &[]);
        return Ok(());
    }
    let Some(device) = rumus::testing::wgpu_or_skip() else {
        return Ok(());
    };
    let data = points(256, 1)?;
    let plain = reads_of_fit(&device, &data, vec![], 32)?;
    let per_class = reads_of_fit(&device, &data, vec![Metric::Precision, Metric::Recall, Metric::F1], 32)?;
    let everything = reads_of_fit(&device, &data, all_metrics(), 32)?;
    // 8 steps an epoch, then 2: the reads do not depend on the steps.
    let fewer_steps = reads_of_fit(&device, &data, all_metrics(), 128)?;
    assert_eq!((per_class, everything, fewer_steps), (plain, plain, plain), "reads of a 2-epoch fit");
    Ok(())
}
