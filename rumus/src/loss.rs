//! Loss functions as free functions, each the mean over the batch (a rank-0 tensor). They are
//! the same ops as the methods on [`RawTensor`]; see there for the details.

use crate::{RawTensor, Result};

/// Cross-entropy of logits `[n, c]` against u32 class targets `[n]`, with label smoothing in
/// `[0, 1)`.
///
/// ```
/// use rumus::{loss, Device, RawTensor};
///
/// let device = Device::cpu();
/// let logits = RawTensor::from_vec(vec![0.0, 0.0, 10.0, 0.0], &[2, 2], &device)?;
/// let targets = RawTensor::from_indices(&[1, 0], &[2], &device)?;
/// let mean = loss::cross_entropy(&logits, &targets, 0.0)?.item()?;
/// // Row 0: -ln(1/2); row 1: ln(1 + e^-10).
/// let expected = (2f32.ln() + (-10f32).exp().ln_1p()) / 2.0;
/// assert!((mean - expected).abs() < 1e-6);
/// let bad = RawTensor::from_indices(&[1, 2], &[2], &device)?; // class 2 of 2
/// assert!(matches!(loss::cross_entropy(&logits, &bad, 0.0), Err(rumus::Error::IndexOutOfRange { .. })));
/// # Ok::<(), rumus::Error>(())
/// ```
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
