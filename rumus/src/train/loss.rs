//! The losses `fit` can minimise, chosen by target kind; they delegate to [`crate::loss`].

use crate::data::TargetKind;
use crate::{Error, RawTensor, Result};

/// The loss `fit` minimises. The default follows the dataset's targets: cross-entropy for
/// class targets, mean squared error for regression targets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// Softmax cross-entropy of logits `[batch, classes]` against class indices `[batch]`,
    /// averaged over the batch; the target distribution is `(1-s)·onehot + s/classes` (PyTorch's
    /// `label_smoothing`). Logits with more axes, `[batch, T, .., classes]` (per-token targets
    /// such as [`SeqClass`](crate::data::SeqClass)), take targets `[batch, T, ..]`: every
    /// position is one row and the loss is the mean over all positions (PyTorch's
    /// `F.cross_entropy(logits.view(-1, classes), targets.view(-1))`).
    CrossEntropy {
        /// Smoothing `s` in `[0, 1)`: the target distribution is `(1-s)·onehot + s/classes`.
        label_smoothing: f32,
    },
    /// Mean of squared differences over all elements (PyTorch's `MSELoss`).
    Mse,
}

impl Loss {
    /// Cross-entropy without label smoothing.
    pub fn cross_entropy() -> Self {
        Loss::CrossEntropy { label_smoothing: 0.0 }
    }

    pub(crate) fn default_for(kind: TargetKind) -> Self {
        match kind {
            TargetKind::Class { .. } => Loss::cross_entropy(),
            TargetKind::Regression { .. } => Loss::Mse,
        }
    }

    /// Checks that this loss can be computed against targets of `kind`.
    pub(crate) fn check(&self, kind: TargetKind) -> Result<()> {
        match (self, kind) {
            (Loss::CrossEntropy { label_smoothing: s }, TargetKind::Class { .. }) => {
                if (0.0..1.0).contains(s) {
                    Ok(())
                } else {
                    Err(Error::invalid("Loss::CrossEntropy", format!("label_smoothing {s} must be in [0, 1)")))
                }
            }
            (Loss::Mse, TargetKind::Regression { .. }) => Ok(()),
            (loss, kind) => Err(Error::invalid("fit", format!("loss {loss:?} cannot be used with {kind:?} targets"))),
        }
    }

    /// The mean loss of a batch (a differentiable scalar).
    pub fn compute(&self, outputs: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
        match *self {
            Loss::CrossEntropy { label_smoothing } => {
                let (logits, targets) = class_rows("cross_entropy", outputs, targets)?;
                crate::loss::cross_entropy(&logits, &targets, label_smoothing)
            }
            Loss::Mse => crate::loss::mse_loss(outputs, targets),
        }
    }
}

/// Logits `[batch, .., classes]` and targets `[batch, ..]` as rows `[positions, classes]` and
/// `[positions]`, one row per position. Logits of rank 2 or less pass through unchanged (the
/// kernels check them); with more axes the targets' shape must be the logits' leading axes.
pub(crate) fn class_rows(op: &'static str, logits: &RawTensor, targets: &RawTensor) -> Result<(RawTensor, RawTensor)> {
    let shape = logits.shape();
    if shape.len() <= 2 {
        return Ok((logits.clone(), targets.clone()));
    }
    let (leading, classes) = shape.split_at(shape.len() - 1);
    if targets.shape() != leading {
        return Err(Error::shape(
            op,
            format!(
                "logits {shape:?} need targets {leading:?} (one class index per position), got {:?}",
                targets.shape()
            ),
        ));
    }
    let rows = crate::layout::checked_numel(op, leading)?;
    Ok((logits.reshape(&[rows, classes[0]])?, targets.reshape(&[rows])?))
}
