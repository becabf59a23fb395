//! The losses `fit` can minimise, chosen by target kind; they delegate to [`crate::loss`].

use crate::data::TargetKind;
use crate::{Error, RawTensor, Result};

/// The loss `fit` minimises. The default follows the dataset's targets: cross-entropy for
/// class targets, mean squared error for regression targets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// Softmax cross-entropy of logits `[batch, classes]` against class indices, averaged over
    /// the batch; the target distribution is `(1-s)·onehot + s/classes` (PyTorch's
    /// `label_smoothing`).
    CrossEntropy { label_smoothing: f32 },
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
            Loss::CrossEntropy { label_smoothing } => crate::loss::cross_entropy(outputs, targets, label_smoothing),
            Loss::Mse => crate::loss::mse_loss(outputs, targets),
        }
    }
}
