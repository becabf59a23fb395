//! Epoch statistics accumulated on the device: the loss sum and the correct counts stay a
//! small tensor there and are read only when a progress line or the epoch's end needs them.

use crate::backend::{DType, GatherArgs};
use crate::data::TargetKind;
use crate::{Device, Error, RawTensor, Result};

use super::Logs;

/// Running sums of one epoch (or one evaluation).
pub(crate) struct Stats {
    kind: TargetKind,
    top_k: Option<usize>,
    /// `[loss_sum, correct, top_k_correct]` (as many entries as there are metrics).
    sum: Option<RawTensor>,
    /// One-hot rows that place each per-batch scalar into `sum` without a concat op.
    basis: Vec<RawTensor>,
    /// `k - 0.5` for top-1 and top-k, made once so a step uploads nothing.
    limits: Vec<RawTensor>,
    seen: usize,
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
        let limits = [Some(1), top_k]
            .iter()
            .flatten()
            .map(|&k| RawTensor::full(k as f32 - 0.5, &[1], device))
            .collect::<Result<Vec<_>>>()?;
        Ok(Stats { kind, top_k, sum: None, basis, limits, seen: 0 })
    }

    /// Adds a batch: its mean loss, the model outputs and the targets. No host read.
    pub(crate) fn add(&mut self, loss: &RawTensor, outputs: &RawTensor, targets: &RawTensor) -> Result<()> {
        let _no_grad = crate::autograd::NoGradGuard::new();
        let n = outputs.shape().first().copied().unwrap_or(0);
        let mut parts = vec![loss.detach().mul_scalar(n as f32)?];
        if let TargetKind::Class { .. } = self.kind {
            let rank = rank_of_target(&outputs.detach(), targets)?;
            for limit in &self.limits {
                parts.push(count_below(&rank, limit)?);
            }
        }
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
        self.seen += n;
        Ok(())
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
        let n = self.seen.max(1) as f32;
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

/// For each row, how many logits are strictly larger than the target's logit (`[batch]`).
/// The prediction is correct at top-k when that count is below k (ties count as correct).
fn rank_of_target(logits: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
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
    let (rows, classes) = (logits.shape()[0], logits.shape()[1]);
    let x = logits.contiguous()?;
    let t = targets.contiguous()?;
    let args = GatherArgs { outer: rows, len: classes, inner: 1, count: 1 };
    let picked = x.device().backend().gather(x.storage(), t.storage(), &args)?;
    let picked = RawTensor::from_kernel(picked, &[rows, 1], x.device());
    x.binary(crate::backend::BinaryOp::Gt, &picked)?.sum(&[1], false)
}

/// Number of rows whose rank is below `limit` (`k - 0.5`), as a one-element tensor.
fn count_below(rank: &RawTensor, limit: &RawTensor) -> Result<RawTensor> {
    limit.binary(crate::backend::BinaryOp::Gt, rank)?.sum_all()
}
