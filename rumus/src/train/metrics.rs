//! Epoch statistics accumulated on the device: the loss sum, the correct counts, the MAE sum
//! and the per-class (or confusion) counts stay small tensors there and are read, in one
//! transfer, only when a progress line or the epoch's end needs them.

use crate::data::TargetKind;
use crate::ops::{BinaryOp, DType};
use crate::{Device, Error, RawTensor, Result};

use super::loss::class_rows;
use super::metric::MetricSet;
use super::{ClassCounts, ConfusionMatrix, Logs};

/// Running sums of one epoch (or one evaluation).
pub(crate) struct Stats {
    kind: TargetKind,
    metrics: MetricSet,
    /// `[loss_sum, correct, top_k_correct.., mae_sum]` (as many entries as there are metrics).
    sum: Option<RawTensor>,
    /// Per-class counts: `[3, classes]` (true positives, predictions, targets) for precision,
    /// recall and F1, or the `[classes, classes]` confusion counts when those are asked for
    /// (the per-class counts follow from them).
    class_sum: Option<RawTensor>,
    /// One-hot rows that place each per-batch scalar into `sum` without a concat op.
    basis: Vec<RawTensor>,
    /// `k - 0.5` for each top-k, made once so a step uploads nothing.
    top_k_limits: Vec<RawTensor>,
    /// The class indices `0, 1, ..` as f32, made on the first batch (the class count is known then).
    class_index: Option<RawTensor>,
    /// Samples added.
    seen: usize,
    /// What the means divide by: samples, or positions (tokens) for per-position class targets.
    units: usize,
}

/// What one read of the sums gives: the means by name, and the per-class counts and confusion
/// matrix when asked for.
pub(crate) struct Reading {
    pub(crate) logs: Logs,
    pub(crate) class_counts: Option<ClassCounts>,
    pub(crate) confusion: Option<ConfusionMatrix>,
}

impl Stats {
    pub(crate) fn new(kind: TargetKind, metrics: &MetricSet, device: &Device) -> Result<Self> {
        let width = match kind {
            TargetKind::Class { .. } => 2 + metrics.top_k.len(),
            TargetKind::Regression { .. } => 1 + usize::from(metrics.mae),
        };
        let basis = (0..width)
            .map(|i| {
                let mut v = vec![0.0; width];
                v[i] = 1.0;
                RawTensor::from_vec(v, &[width], device)
            })
            .collect::<Result<Vec<_>>>()?;
        let top_k_limits =
            metrics.top_k.iter().map(|&k| RawTensor::full(k as f32 - 0.5, &[1], device)).collect::<Result<_>>()?;
        Ok(Stats {
            kind,
            metrics: metrics.clone(),
            sum: None,
            class_sum: None,
            basis,
            top_k_limits,
            class_index: None,
            seen: 0,
            units: 0,
        })
    }

    /// Adds a batch: its mean loss, the model outputs and the targets. No host read. Class
    /// logits with more than two axes count every position as one prediction
    /// ([`class_rows`]): the loss and accuracies are then means over positions (tokens).
    pub(crate) fn add(&mut self, loss: &RawTensor, outputs: &RawTensor, targets: &RawTensor) -> Result<()> {
        let _no_grad = crate::autograd::NoGradGuard::new();
        let samples = outputs.shape().first().copied().unwrap_or(0);
        let (parts, units) = match self.kind {
            TargetKind::Class { .. } => self.class_parts(loss, outputs, targets)?,
            TargetKind::Regression { .. } => (self.regression_parts(loss, outputs, targets, samples)?, samples),
        };
        let mut row: Option<RawTensor> = None;
        for (part, basis) in parts.iter().zip(&self.basis) {
            let placed = part.reshape(&[1])?.mul(basis)?;
            row = Some(match row {
                Some(r) => r.add(&placed)?,
                None => placed,
            });
        }
        if let Some(row) = row {
            self.sum = Some(match self.sum.take() {
                Some(s) => s.add(&row)?,
                None => row,
            });
        }
        self.seen += samples;
        self.units += units;
        Ok(())
    }

    /// The loss sum and, with MAE, the sum of the per-sample mean absolute errors.
    fn regression_parts(
        &self,
        loss: &RawTensor,
        outputs: &RawTensor,
        targets: &RawTensor,
        samples: usize,
    ) -> Result<Vec<RawTensor>> {
        let mut parts = vec![loss.detach().mul_scalar(samples as f32)?];
        if self.metrics.mae {
            let outputs = outputs.detach();
            if outputs.shape() != targets.shape() || outputs.numel() == 0 {
                return Err(Error::shape(
                    "mae",
                    format!(
                        "outputs {:?} and targets {:?} must have one equal shape",
                        outputs.shape(),
                        targets.shape()
                    ),
                ));
            }
            parts.push(outputs.sub(targets)?.abs()?.mean_all()?.mul_scalar(samples as f32)?);
        }
        Ok(parts)
    }

    /// The loss sum, correct count and top-k counts of a class batch, and its number of rows;
    /// adds its per-class counts to `class_sum`.
    fn class_parts(
        &mut self,
        loss: &RawTensor,
        outputs: &RawTensor,
        targets: &RawTensor,
    ) -> Result<(Vec<RawTensor>, usize)> {
        let (logits, targets) = class_rows("accuracy", &outputs.detach(), targets)?;
        check_class_batch(&logits, &targets)?;
        let rows = logits.shape()[0];
        let class_index = self.class_index(&logits)?;
        let argmax = logits.argmax(1)?;
        let predicted = class_index.index_select(0, &argmax)?;
        let wanted = class_index.index_select(0, &targets)?;
        let correct = predicted.binary(BinaryOp::Eq, &wanted)?;
        let mut parts = vec![loss.detach().mul_scalar(rows as f32)?, correct.sum_all()?];
        if !self.top_k_limits.is_empty() {
            let rank = rank_of_target(&logits, &targets, &class_index)?;
            for limit in &self.top_k_limits {
                parts.push(limit.binary(BinaryOp::Gt, &rank)?.sum_all()?);
            }
        }
        let counts = if self.metrics.confusion {
            Some(confusion_counts(&predicted, &wanted, &class_index)?)
        } else if self.metrics.per_class() {
            // True positives, predictions and targets per class: O(rows + classes) memory.
            let classes = class_index.numel();
            let ones = correct.mul_scalar(0.0)?.add_scalar(1.0)?;
            let (hits, predicted) = (targets.bincount(&correct, classes)?, argmax.bincount(&ones, classes)?);
            Some(RawTensor::stack(&[&hits, &predicted, &targets.bincount(&ones, classes)?], 0)?)
        } else {
            None
        };
        if let Some(counts) = counts {
            self.class_sum = Some(match self.class_sum.take() {
                Some(s) => s.add(&counts)?,
                None => counts,
            });
        }
        Ok((parts, rows))
    }

    pub(crate) fn seen(&self) -> usize {
        self.seen
    }

    /// Reads the sums (one device → host transfer) as means: `loss`, `accuracy`,
    /// `top{k}_accuracy`, `precision`, `recall`, `f1`, `mae` (each name after `prefix`), with
    /// the per-class counts and the confusion matrix when asked for.
    pub(crate) fn read(&self, prefix: &str) -> Result<Reading> {
        let mut reading = Reading { logs: Logs::new(), class_counts: None, confusion: None };
        let Some(sum) = &self.sum else {
            return Ok(reading);
        };
        let scalars = sum.numel();
        let values = match &self.class_sum {
            Some(classes) => RawTensor::concat(&[sum, &classes.reshape(&[classes.numel()])?], 0)?.to_vec()?,
            None => sum.to_vec()?,
        };
        let (values, class_values) = values.split_at(scalars);
        let n = self.units.max(1) as f32;
        let logs = &mut reading.logs;
        logs.insert(format!("{prefix}loss"), values[0] / n);
        match self.kind {
            TargetKind::Class { .. } => {
                logs.insert(format!("{prefix}accuracy"), values[1] / n);
                for (k, v) in self.metrics.top_k.iter().zip(&values[2..]) {
                    logs.insert(format!("{prefix}top{k}_accuracy"), v / n);
                }
            }
            TargetKind::Regression { .. } => {
                if let (true, Some(v)) = (self.metrics.mae, values.get(1)) {
                    logs.insert(format!("{prefix}mae"), v / n);
                }
            }
        }
        if !class_values.is_empty() {
            let classes = self.class_index.as_ref().map_or(0, RawTensor::numel);
            let counts = if self.metrics.confusion {
                let matrix = ConfusionMatrix::from_values(class_values, classes);
                let counts = matrix.class_counts();
                reading.confusion = Some(matrix);
                counts
            } else {
                ClassCounts::from_rows(class_values, classes)
            };
            for (on, name, value) in [
                (self.metrics.precision, "precision", counts.macro_precision()),
                (self.metrics.recall, "recall", counts.macro_recall()),
                (self.metrics.f1, "f1", counts.macro_f1()),
            ] {
                if on {
                    logs.insert(format!("{prefix}{name}"), value);
                }
            }
            reading.class_counts = self.metrics.per_class().then_some(counts);
        }
        Ok(reading)
    }
}

impl Stats {
    /// `[0, 1, .., classes - 1]` as f32 on the logits' device, made once.
    fn class_index(&mut self, logits: &RawTensor) -> Result<RawTensor> {
        let classes = logits.shape()[1];
        match &self.class_index {
            Some(index) if index.shape() == [classes] => Ok(index.clone()),
            _ => {
                let index = RawTensor::from_vec((0..classes).map(|c| c as f32).collect(), &[classes], logits.device())?;
                self.class_index = Some(index.clone());
                Ok(index)
            }
        }
    }
}

/// A batch's confusion counts `[classes, classes]` from its predicted and target classes (f32
/// `[rows]`): the one-hot targets' transpose times the one-hot predictions, one matmul (its
/// `rows · classes` one-hot rows are why the confusion matrix has a class limit).
fn confusion_counts(predicted: &RawTensor, wanted: &RawTensor, class_index: &RawTensor) -> Result<RawTensor> {
    let rows = predicted.numel();
    let classes = class_index.reshape(&[1, class_index.numel()])?;
    let predicted = predicted.reshape(&[rows, 1])?.binary(BinaryOp::Eq, &classes)?;
    let wanted = wanted.reshape(&[rows, 1])?.binary(BinaryOp::Eq, &classes)?;
    wanted.transpose(0, 1)?.matmul(&predicted)
}

/// Logits `[batch, classes]` (at least one class) and u32 targets `[batch]`.
fn check_class_batch(logits: &RawTensor, targets: &RawTensor) -> Result<()> {
    if logits.rank() != 2 || targets.dtype() != DType::U32 || targets.shape() != [logits.shape()[0]] {
        return Err(Error::shape(
            "accuracy",
            format!(
                "needs logits [batch, classes] and u32 targets [batch], got {:?} and {:?}",
                logits.shape(),
                targets.shape()
            ),
        ));
    }
    if logits.shape()[1] == 0 {
        return Err(Error::shape("accuracy", format!("logits {:?} have no class", logits.shape())));
    }
    Ok(())
}

/// For each row, the target's place in the order "larger logit first, then lower index" (the
/// same tie rule as the accuracy's argmax, PyTorch's: ties go to the first largest logit): the logits strictly larger than the target's, plus the
/// equal ones at a lower index. The prediction is correct at top-k when that is below k.
fn rank_of_target(logits: &RawTensor, targets: &RawTensor, class_index: &RawTensor) -> Result<RawTensor> {
    let rows = logits.shape()[0];
    let picked = logits.gather(1, &targets.reshape(&[rows, 1])?)?;
    let wanted = class_index.index_select(0, targets)?.reshape(&[rows, 1])?;
    let before_target = wanted.binary(BinaryOp::Gt, &class_index.reshape(&[1, class_index.numel()])?)?;
    let larger = logits.binary(BinaryOp::Gt, &picked)?;
    let tied_before = logits.binary(BinaryOp::Eq, &picked)?.mul(&before_target)?;
    larger.add(&tied_before)?.sum(&[1], false)
}
