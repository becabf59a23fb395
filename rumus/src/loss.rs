//! Loss functions as free functions, each the mean over the batch (a rank-0 tensor). They are
//! the same ops as the methods on [`RawTensor`]; see there for the details.

use crate::{RawTensor, Result};

/// Cross-entropy of logits `[n, c]` against u32 class targets `[n]`, with label smoothing in
/// `[0, 1)`.
pub fn cross_entropy(logits: &RawTensor, targets: &RawTensor, label_smoothing: f32) -> Result<RawTensor> {
    logits.cross_entropy(targets, label_smoothing)
}

/// Negative log-likelihood of log-probabilities `[n, c]` at u32 class targets `[n]`.
pub fn nll_loss(log_probs: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
    log_probs.nll_loss(targets)
}

/// Mean squared error of equally shaped tensors.
pub fn mse_loss(pred: &RawTensor, target: &RawTensor) -> Result<RawTensor> {
    pred.mse_loss(target)
}

/// Binary cross-entropy of logits against targets in `[0, 1]`, in the numerically stable form.
pub fn bce_with_logits(logits: &RawTensor, target: &RawTensor) -> Result<RawTensor> {
    logits.bce_with_logits(target)
}
