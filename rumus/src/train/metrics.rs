//! Epoch statistics accumulated on the device: the loss sum and the correct counts stay a
//! small tensor there and are read only when a progress line or the epoch's end needs them.

use crate::data::TargetKind;
use crate::ops::{BinaryOp, DType};
use crate::{Device, Error, RawTensor, Result};

use super::loss::class_rows;
use super::Logs;

/// Running sums of one epoch (or one evaluation).
pub(crate) struct Stats {
    kind: TargetKind,
    top_k: Option<usize>,
    /// `[loss_sum, correct, top_k_correct]` (as many entries as there are metrics).
    sum: Option<RawTensor>,
    /// One-hot rows that place each per-batch scalar into `sum` without a concat op.
    basis: Vec<RawTensor>,
    /// `k - 0.5` for top-k, made once so a step uploads nothing.
    top_k_limit: Option<RawTensor>,
    /// The class indices `0, 1, ..` as f32, made on the first batch (the class count is known then).
    class_index: Option<RawTensor>,
    /// Samples added.
    seen: usize,
    /// What the means divide by: samples, or positions (tokens) for per-position class targets.
    units: usize,
}

impl Stats {
    pub(crate) fn new(kind: TargetKind, top_k: Option<usize>, device: &Device) -> Result<Self> {
        let width = match kind {
            TargetKind::Class { .. } => 2 + usize::from(top_k.is_some()),
            TargetKind::Regression { .. } => 1,
        };
        let basis = (0..width)
            .map(|i| {
                let mut v = vec![0.0; width];
                v[i] = 1.0;
                RawTensor::from_vec(v, &[width], device)
            })
            .collect::<Result<Vec<_>>>()?;
        let top_k_limit = top_k.map(|k| RawTensor::full(k as f32 - 0.5, &[1], device)).transpose()?;
        Ok(Stats { kind, top_k, sum: None, basis, top_k_limit, class_index: None, seen: 0, units: 0 })
    }

    /// Adds a batch: its mean loss, the model outputs and the targets. No host read. Class
    /// logits with more than two axes count every position as one prediction
    /// ([`class_rows`]): the loss and accuracies are then means over positions (tokens).
    pub(crate) fn add(&mut self, loss: &RawTensor, outputs: &RawTensor, targets: &RawTensor) -> Result<()> {
        let _no_grad = crate::autograd::NoGradGuard::new();
        let samples = outputs.shape().first().copied().unwrap_or(0);
        let (parts, units) = match self.kind {
            TargetKind::Class { .. } => self.class_parts(loss, outputs, targets)?,
            TargetKind::Regression { .. } => (vec![loss.detach().mul_scalar(samples as f32)?], samples),
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

    /// The loss sum, correct count and top-k count of a class batch, and its number of rows.
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
        let mut parts = vec![loss.detach().mul_scalar(rows as f32)?, correct_top1(&logits, &targets, &class_index)?];
        if let Some(limit) = &self.top_k_limit {
            let rank = rank_of_target(&logits, &targets, &class_index)?;
            parts.push(limit.binary(BinaryOp::Gt, &rank)?.sum_all()?);
        }
        Ok((parts, rows))
    }

    pub(crate) fn seen(&self) -> usize {
        self.seen
    }

    /// Reads the sums (one device → host transfer) as means: `loss`, `accuracy`, `top{k}_accuracy`.
    pub(crate) fn read(&self, prefix: &str) -> Result<Logs> {
        let mut logs = Logs::new();
        let Some(sum) = &self.sum else {
            return Ok(logs);
        };
        let values = sum.to_vec()?;
        let n = self.units.max(1) as f32;
        logs.insert(format!("{prefix}loss"), values[0] / n);
        if values.len() > 1 {
            logs.insert(format!("{prefix}accuracy"), values[1] / n);
        }
        if let (Some(k), Some(v)) = (self.top_k, values.get(2)) {
            logs.insert(format!("{prefix}top{k}_accuracy"), v / n);
        }
        Ok(logs)
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

/// Rows whose argmax is the target, as a one-element tensor. Ties go to the first largest
/// logit (PyTorch's `argmax`), so all-equal logits are correct only for class 0, never for all.
fn correct_top1(logits: &RawTensor, targets: &RawTensor, class_index: &RawTensor) -> Result<RawTensor> {
    let predicted = class_index.index_select(0, &logits.argmax(1)?)?;
    let wanted = class_index.index_select(0, targets)?;
    predicted.binary(BinaryOp::Eq, &wanted)?.sum_all()
}

/// For each row, the target's place in the order "larger logit first, then lower index" (the
/// same tie rule as [`correct_top1`]): the logits strictly larger than the target's, plus the
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
