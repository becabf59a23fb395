//! Language-model training: per-token class targets (`SeqClass`) in `fit`, `evaluate` and the
//! loss; AdamW with weight decay on matrices only; `Fit::steps_per_epoch`; gradient
//! accumulation (`Fit::accumulate_grad_batches`) on CPU and wgpu.

use std::sync::{Arc, Mutex};

use rumus::data::{DataLoader, SeqClass};
use rumus::nn::{named_params, Param};
use rumus::optim::schedule::Progress as At;
use rumus::prelude::*;
use rumus::testing::wgpu_or_skip;
use rumus::train::{evaluate_with, Callback, EvalSettings, Logs, TrainContext};

const T: usize = 8;
const V: usize = 10;

/// Token ids `[8]` → per-position logits `[8, 10]`.
#[model(input = [8])]
pub struct Tok {
    net: layers![Embedding(10, 16), Linear(10)],
}

/// `n` sequences of `T` random token ids; the target of each token is `(token + 1) % V`.
/// Records every index it is asked for; `target_len` other than `T` makes malformed targets.
struct Shift {
    x: Vec<u32>,
    n: usize,
    target_len: usize,
    asked: Mutex<Vec<usize>>,
}

impl Shift {
    fn new(n: usize, seed: u64) -> Self {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let x = (0..n * T)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 33) % V as u64) as u32
            })
            .collect();
        Shift { x, n, target_len: T, asked: Mutex::new(Vec::new()) }
    }

    fn target(&self, i: usize, t: usize) -> u32 {
        (self.x[i * T + t] + 1) % V as u32
    }

    fn asked(&self) -> Vec<usize> {
        self.asked.lock().unwrap().clone()
    }
}

impl Dataset for Shift {
    type Sample = Shape1<T>;
    type Target = SeqClass<T, V>;

    fn len(&self) -> usize {
        self.n
    }

    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<Shape1<T>>, RawTensor)> {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for (position, &i) in indices.iter().enumerate() {
            if i >= self.n {
                return Err(Error::IndexOutOfRange {
                    op: "Shift::get_batch",
                    index: i as i64,
                    limit: self.n,
                    position,
                });
            }
            x.extend_from_slice(&self.x[i * T..(i + 1) * T]);
            y.extend((0..self.target_len).map(|t| self.target(i, t)));
        }
        self.asked.lock().unwrap().extend_from_slice(indices);
        let b = indices.len();
        let inputs = Tensor::from_raw(RawTensor::from_indices(&x, &[b, T], device)?)?;
        Ok((inputs, RawTensor::from_indices(&y, &[b, self.target_len], device)?))
    }
}

fn quiet(epochs: usize) -> Fit<'static> {
    Fit::epochs(epochs).verbose(Verbosity::Quiet)
}

fn weights(model: &dyn Module) -> Vec<(String, Vec<f32>)> {
    named_params(model).into_iter().map(|(n, p)| (n, p.to_vec().unwrap())).collect()
}

/// Host cross-entropy of `[rows, V]` logits with label smoothing `s`, the mean over rows, plus
/// the fraction of rows whose first largest logit is the target and the top-3 fraction.
fn host_metrics(logits: &[f32], targets: &[u32], s: f64) -> (f64, f64, f64) {
    let (mut loss, mut top1, mut top3) = (0.0, 0.0, 0.0);
    for (row, &t) in logits.chunks(V).zip(targets) {
        let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let lse = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        let nll = lse - row[t as usize] as f64;
        let mean_nll = lse - row.iter().map(|&v| v as f64).sum::<f64>() / V as f64;
        loss += (1.0 - s) * nll + s * mean_nll;
        let rank = row
            .iter()
            .enumerate()
            .filter(|&(j, &v)| v > row[t as usize] || (v == row[t as usize] && j < t as usize))
            .count();
        top1 += f64::from(rank == 0);
        top3 += f64::from(rank < 3);
    }
    let n = targets.len() as f64;
    (loss / n, top1 / n, top3 / n)
}

#[test]
fn a_token_model_learns_a_per_token_mapping() -> Result<()> {
    let (train, test) = (Shift::new(256, 1), Shift::new(64, 2));
    let mut model = Tok::new(&Device::cpu(), 3)?;
    let before = model.evaluate(&test)?;
    let history = model.fit(&train, quiet(8).batch_size(32).optimizer(Adam::new(2e-2)).validation(&test))?;
    let after = model.evaluate(&test)?;
    println!("token accuracy {} -> {}, loss {} -> {}", before.accuracy, after.accuracy, before.loss, after.loss);
    assert!(before.accuracy < 0.4, "untrained token accuracy {}", before.accuracy);
    assert!(after.accuracy > 0.99, "trained token accuracy {}", after.accuracy);
    assert!(after.loss < 0.2 && after.loss < before.loss / 5.0, "loss {} -> {}", before.loss, after.loss);
    assert_eq!(after.samples, 64);
    let loss = history.get("loss").unwrap();
    assert!(loss[7] < loss[0] / 5.0, "training loss {loss:?}");
    assert!(history.last("accuracy").unwrap() > 0.95);
    assert!((history.last("val_accuracy").unwrap() - after.accuracy).abs() < 1e-6);
    Ok(())
}

#[test]
fn the_loss_and_metrics_are_means_over_tokens_of_a_hand_computation() -> Result<()> {
    let data = Shift::new(4, 7);
    let cpu = Device::cpu();
    let model = Tok::new(&cpu, 5)?;
    let (inputs, targets) = data.get_batch(&[0, 1, 2, 3], &cpu)?;
    let logits = model.predict(&inputs)?;
    assert_eq!(logits.raw().shape(), [4, T, V]);
    let (host_logits, host_targets) = (logits.raw().to_vec()?, targets.to_vec_u32()?);
    for s in [0.0, 0.1] {
        let (want, _, _) = host_metrics(&host_logits, &host_targets, s);
        let got = Loss::CrossEntropy { label_smoothing: s as f32 }.compute(logits.raw(), &targets)?.item()?;
        assert!((got as f64 - want).abs() < 1e-5, "smoothing {s}: loss {got}, by hand {want}");
    }
    let (want_loss, want_acc, want_top3) = host_metrics(&host_logits, &host_targets, 0.0);
    // Batches of 3 and 1 samples: the means still weigh every token once.
    let eval = evaluate_with(
        &model,
        &data,
        &EvalSettings { batch_size: 3, loss: None, top_k: Some(3), ..EvalSettings::default() },
    )?;
    assert!((eval.loss as f64 - want_loss).abs() < 1e-5, "evaluate loss {}, by hand {want_loss}", eval.loss);
    assert!((eval.accuracy as f64 - want_acc).abs() < 1e-6, "token accuracy {}, by hand {want_acc}", eval.accuracy);
    assert!((eval.top_k_accuracy.unwrap() as f64 - want_top3).abs() < 1e-6);
    assert_eq!(eval.samples, 4);
    Ok(())
}

#[test]
fn targets_of_the_wrong_shape_are_shape_errors() -> Result<()> {
    let cpu = Device::cpu();
    let logits = RawTensor::zeros(&[2, T, V], &cpu)?;
    for shape in [vec![2, T - 1], vec![2 * T], vec![2, T, 1], vec![T, 2]] {
        let n: usize = shape.iter().product();
        let targets = RawTensor::from_indices(&vec![0; n], &shape, &cpu)?;
        let err = Loss::cross_entropy().compute(&logits, &targets).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "targets {shape:?}: {err}");
    }
    let mut bad = Shift::new(8, 1);
    bad.target_len = T - 1;
    let mut model = Tok::new(&cpu, 1)?;
    let err = model.fit(&bad, quiet(1).batch_size(4)).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "fit: {err}");
    let err = model.evaluate(&bad).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "evaluate: {err}");
    Ok(())
}

/// Records the `step` of every `on_metrics` call.
struct MetricSteps(Arc<Mutex<Vec<(usize, usize)>>>);

impl Callback for MetricSteps {
    fn on_metrics(&mut self, epoch: usize, step: usize, _: &Logs, _: &mut TrainContext<'_>) -> Result<()> {
        self.0.lock().unwrap().push((epoch, step));
        Ok(())
    }
}

/// A constant schedule that records where each step ran.
fn recording_schedule() -> (Arc<Mutex<Vec<At>>>, impl Fn(f32, At) -> f32 + Send) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    (seen, move |base: f32, at: At| {
        log.lock().unwrap().push(at);
        base
    })
}

#[test]
fn steps_per_epoch_draws_successive_shuffled_passes_and_counts_steps() -> Result<()> {
    let data = Shift::new(10, 3);
    let mut model = Tok::new(&Device::cpu(), 2)?;
    let (points, schedule) = recording_schedule();
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let history = model.fit(
        &data,
        quiet(2)
            .batch_size(4)
            .shuffle_seed(9)
            .steps_per_epoch(3)
            .schedule(schedule)
            .callback(MetricSteps(metrics.clone())),
    )?;
    assert_eq!(history.epochs(), 2);
    // 2 epochs of 3 batches of 4: the samples of shuffled passes 0, 1 and the start of 2, in order.
    let loader = DataLoader::new(&data, 4, &Device::cpu())?.shuffle(9);
    let want: Vec<usize> = (0..3).flat_map(|pass| loader.epoch_order(pass)).take(24).collect();
    assert_eq!(data.asked(), want);
    assert_ne!(loader.epoch_order(0), loader.epoch_order(1), "passes are shuffled anew");
    let points = points.lock().unwrap().clone();
    assert_eq!(points.len(), 6);
    for (i, at) in points.iter().enumerate() {
        assert_eq!((at.epoch, at.step, at.steps_per_epoch, at.total_steps), (i / 3, i, 3, 6));
    }
    assert_eq!(*metrics.lock().unwrap(), [(0, 3), (1, 3)]);
    Ok(())
}

#[test]
fn zero_steps_per_epoch_or_accumulated_batches_are_errors() -> Result<()> {
    let data = Shift::new(8, 1);
    let mut model = Tok::new(&Device::cpu(), 1)?;
    for cfg in [quiet(1).steps_per_epoch(0), quiet(1).accumulate_grad_batches(0), quiet(1).validation_steps(0)] {
        let err = model.fit(&data, cfg).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    }
    assert!(data.asked().is_empty());
    Ok(())
}

/// The weights after `epochs` epochs over 16 samples in order, `batch` samples a batch,
/// accumulating `accumulate` batches per step.
fn train_in_order(
    device: &Device,
    optimizer: impl Optimizer + 'static,
    batch: usize,
    accumulate: usize,
    epochs: usize,
) -> Result<Vec<(String, Vec<f32>)>> {
    let data = Shift::new(16, 4);
    let mut model = Tok::new(device, 8)?;
    model.fit(
        &data,
        quiet(epochs).batch_size(batch).no_shuffle().accumulate_grad_batches(accumulate).optimizer(optimizer),
    )?;
    Ok(weights(&model))
}

fn assert_close(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)], tol: f32) {
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(b) {
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!((p - q).abs() <= tol, "{name}[{i}]: {p} vs {q}");
        }
    }
}

#[test]
fn accumulating_two_batches_of_8_equals_one_batch_of_16_on_cpu() -> Result<()> {
    let cpu = Device::cpu();
    let start = weights(&Tok::new(&cpu, 8)?);
    let one = train_in_order(&cpu, Sgd::new(0.5), 16, 1, 3)?;
    let two = train_in_order(&cpu, Sgd::new(0.5), 8, 2, 3)?;
    assert_close(&one, &two, 1e-5);
    let apart = train_in_order(&cpu, Sgd::new(0.5), 8, 1, 3)?;
    assert!(apart.iter().zip(&one).any(|((_, a), (_, b))| a.iter().zip(b).any(|(p, q)| (p - q).abs() > 1e-3)));
    assert!(one.iter().zip(&start).any(|((_, a), (_, b))| a != b), "SGD moved nothing");
    let one = train_in_order(&cpu, Adam::new(1e-2), 16, 1, 3)?;
    let two = train_in_order(&cpu, Adam::new(1e-2), 8, 2, 3)?;
    assert_close(&one, &two, 1e-5);
    Ok(())
}

#[test]
fn an_epoch_of_3_batches_accumulating_2_makes_2_steps() -> Result<()> {
    let data = Shift::new(12, 5);
    let mut model = Tok::new(&Device::cpu(), 1)?;
    let (points, schedule) = recording_schedule();
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let cfg =
        quiet(2).batch_size(4).accumulate_grad_batches(2).schedule(schedule).callback(MetricSteps(metrics.clone()));
    model.fit(&data, cfg)?;
    let points: Vec<(usize, usize, usize, usize)> =
        points.lock().unwrap().iter().map(|a| (a.epoch, a.step, a.steps_per_epoch, a.total_steps)).collect();
    assert_eq!(points, [(0, 0, 2, 4), (0, 1, 2, 4), (1, 2, 2, 4), (1, 3, 2, 4)]);
    assert_eq!(*metrics.lock().unwrap(), [(0, 2), (1, 2)]);
    // With steps_per_epoch, an epoch is that many optimizer steps of 2 batches each.
    let data = Shift::new(12, 5);
    model.fit(&data, quiet(1).batch_size(4).accumulate_grad_batches(2).steps_per_epoch(3))?;
    assert_eq!(data.asked().len(), 3 * 2 * 4);
    Ok(())
}

#[test]
fn accumulating_two_batches_of_8_equals_one_batch_of_16_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else {
        return Ok(());
    };
    let one = train_in_order(&gpu, Sgd::new(0.5), 16, 1, 2)?;
    let two = train_in_order(&gpu, Sgd::new(0.5), 8, 2, 2)?;
    assert_close(&one, &two, 1e-4);
    // eps well above the gradients' rounding noise: Adam's first steps are nearly sign(g), so a
    // component that is zero up to rounding would otherwise move by ±lr depending on the order
    // of a GPU's sums.
    let adam = || Adam::new(1e-2).eps(1e-3);
    let one = train_in_order(&gpu, adam(), 16, 1, 2)?;
    let two = train_in_order(&gpu, adam(), 8, 2, 2)?;
    assert_close(&one, &two, 1e-4);
    let cpu = train_in_order(&Device::cpu(), adam(), 8, 2, 2)?;
    assert_close(&cpu, &two, 1e-4);
    Ok(())
}

#[test]
fn adamw_decays_matrices_only() -> Result<()> {
    let cpu = Device::cpu();
    let (w0, b0) = ([1.0f32, -2.0, 0.5, 3.0], [0.25f32, -1.5]);
    let step = |optimizer: &mut dyn Optimizer| -> Result<(Vec<f32>, Vec<f32>)> {
        let w = Param::new(RawTensor::from_vec(w0.to_vec(), &[2, 2], &cpu)?)?;
        let b = Param::new(RawTensor::from_vec(b0.to_vec(), &[2], &cpu)?)?;
        // d(loss)/dw = 1, d(loss)/db = 2 everywhere.
        let loss = w.tensor().sum_all()?.add(&b.tensor().sum_all()?.mul_scalar(2.0)?)?;
        let grads = loss.backward()?;
        optimizer.step(&[("w".into(), w.clone()), ("b".into(), b.clone())], &grads)?;
        Ok((w.to_vec()?, b.to_vec()?))
    };
    let (lr, wd, eps) = (0.1f32, 0.5f32, 1e-8f32);
    // Step 1 of Adam: m̂ = g, v̂ = g², so the update is lr·g/(|g| + eps).
    let adam_update = |g: f32| lr * g / (g.abs() + eps);
    let (w, b) = step(&mut AdamW::new(lr).weight_decay(wd).decay_matrices_only())?;
    for (got, p) in w.iter().zip(w0) {
        let want = p * (1.0 - lr * wd) - adam_update(1.0);
        assert!((got - want).abs() < 1e-6, "decayed matrix: {got} vs {want}");
    }
    for (got, p) in b.iter().zip(b0) {
        let want = p - adam_update(2.0);
        assert!((got - want).abs() < 1e-6, "undecayed vector: {got} vs {want}");
    }
    // Without the filter, the vector is decayed too.
    let (_, b) = step(&mut AdamW::new(lr).weight_decay(wd))?;
    for (got, p) in b.iter().zip(b0) {
        let want = p * (1.0 - lr * wd) - adam_update(2.0);
        assert!((got - want).abs() < 1e-6, "decayed vector: {got} vs {want}");
    }
    Ok(())
}

#[test]
fn token_metrics_on_wgpu_equal_the_cpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else {
        return Ok(());
    };
    let data = Shift::new(6, 11);
    let settings = EvalSettings {
        batch_size: 4,
        loss: Some(Loss::CrossEntropy { label_smoothing: 0.1 }),
        top_k: Some(3),
        ..EvalSettings::default()
    };
    let cpu = evaluate_with(&Tok::new(&Device::cpu(), 5)?, &data, &settings)?;
    let wgpu = evaluate_with(&Tok::new(&gpu, 5)?, &data, &settings)?;
    assert!((cpu.loss - wgpu.loss).abs() < 1e-5, "loss: cpu {}, wgpu {}", cpu.loss, wgpu.loss);
    assert_eq!((cpu.accuracy, cpu.top_k_accuracy, cpu.samples), (wgpu.accuracy, wgpu.top_k_accuracy, wgpu.samples));
    assert!(cpu.accuracy > 0.0 && cpu.top_k_accuracy.unwrap() > cpu.accuracy, "{cpu:?}");
    Ok(())
}

#[test]
fn validation_steps_evaluate_the_same_subset_every_epoch() -> Result<()> {
    let (train, val) = (Shift::new(8, 1), Shift::new(20, 2));
    let mut model = Tok::new(&Device::cpu(), 4)?;
    let cfg = quiet(2).batch_size(8).validation_batch_size(3).validation_steps(2).validation(&val);
    let history = model.fit(&train, cfg)?;
    let asked = val.asked();
    assert_eq!(asked.len(), 2 * 6, "two epochs of 2 batches of 3: {asked:?}");
    let (first, second) = asked.split_at(6);
    assert_eq!(first, second, "the same samples every epoch");
    assert!(first.windows(2).all(|w| w[0] < w[1]), "6 distinct samples in order: {first:?}");
    assert_ne!(first, [0, 1, 2, 3, 4, 5], "a random subset, not the first samples");
    // The reported val_loss is the loss of the final model on exactly those samples.
    let (inputs, targets) = val.get_batch(first, &Device::cpu())?;
    let want = Loss::cross_entropy().compute(model.predict(&inputs)?.raw(), &targets)?.item()?;
    let got = history.last("val_loss").unwrap();
    assert!((got - want).abs() < 1e-5, "val_loss {got}, on the subset {want}");
    // A validation_split's held-out samples are subsampled the same way.
    let data = Shift::new(20, 3);
    model.fit(&data, quiet(1).batch_size(5).validation_split(0.5).validation_batch_size(4).validation_steps(1))?;
    let held_out: Vec<usize> = data.asked().into_iter().filter(|&i| i >= 10).collect();
    assert_eq!(held_out.len(), 4, "{held_out:?}");
    Ok(())
}

#[test]
fn per_token_confusion_counts_every_position_on_cpu_and_wgpu() -> Result<()> {
    let data = Shift::new(5, 13);
    let cpu = Device::cpu();
    let model = Tok::new(&cpu, 5)?;
    let (inputs, targets) = data.get_batch(&[0, 1, 2, 3, 4], &cpu)?;
    let logits = model.predict(&inputs)?.raw().to_vec()?;
    let mut want = vec![0u64; V * V];
    for (row, &t) in logits.chunks(V).zip(&targets.to_vec_u32()?) {
        let argmax = (0..V).fold(0, |b, j| if row[j] > row[b] { j } else { b });
        want[t as usize * V + argmax] += 1;
    }
    let settings =
        EvalSettings { batch_size: 2, metrics: vec![Metric::ConfusionMatrix, Metric::F1], ..EvalSettings::default() };
    let on_cpu = evaluate_with(&model, &data, &settings)?;
    let matrix = on_cpu.confusion_matrix.clone().unwrap();
    assert_eq!(matrix.counts(), want, "one count per token:\n{matrix}");
    assert_eq!(matrix.counts().iter().sum::<u64>(), 5 * T as u64);
    assert_eq!(on_cpu.metrics.get("f1"), Some(matrix.class_counts().macro_f1()));
    if let Some(gpu) = wgpu_or_skip() {
        let on_gpu = evaluate_with(&Tok::new(&gpu, 5)?, &data, &settings)?;
        assert_eq!(on_gpu.confusion_matrix, on_cpu.confusion_matrix);
    }
    Ok(())
}
