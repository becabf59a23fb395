//! Loss functions as free functions, with PyTorch's semantics: each is the same op as the
//! method on [`RawTensor`] of the same name (see there for the details). The short forms
//! (`cross_entropy`, `nll_loss`, `mse_loss`, `bce_with_logits`) are means; the others take a
//! [`Reduction`] (mean, sum, or none, which keeps the per-element or per-row shape).
//!
//! | function | PyTorch |
//! | --- | --- |
//! | [`cross_entropy`], [`cross_entropy_with`] ([`CrossEntropyOptions`]: `weight`, `ignore_index`, `label_smoothing`, `reduction`) | `F.cross_entropy` |
//! | [`nll_loss`] | `F.nll_loss` |
//! | [`mse_loss`], [`mse_loss_with`] | `F.mse_loss` |
//! | [`l1_loss`] | `F.l1_loss` |
//! | [`huber_loss`] (`delta`) | `F.huber_loss` |
//! | [`smooth_l1_loss`] (`beta`) | `F.smooth_l1_loss` |
//! | [`binary_cross_entropy`] (probabilities) | `F.binary_cross_entropy` |
//! | [`bce_with_logits`], [`bce_with_logits_with`] (`pos_weight`) | `F.binary_cross_entropy_with_logits` |
//! | [`kl_div`] (`log_target`, [`Reduction::BatchMean`]) | `F.kl_div` |
//!
//! `fit` takes these through [`Loss`](crate::train::Loss), or any closure through
//! [`Fit::loss_fn`](crate::train::Fit::loss_fn).

pub use crate::ops::{CrossEntropyOptions, Reduction};
use crate::{RawTensor, Result};

/// Cross-entropy of logits `[n, c]` against u32 class targets `[n]`, with label smoothing in
/// `[0, 1)`, averaged over the rows.
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

/// Cross-entropy of logits `[.., c]` against u32 class targets `[..]` with class weights, an
/// ignored target, label smoothing and a reduction (PyTorch's `F.cross_entropy`).
///
/// ```
/// use rumus::loss::{self, CrossEntropyOptions, Reduction};
/// use rumus::{Device, RawTensor};
///
/// let device = Device::cpu();
/// let logits = RawTensor::from_vec(vec![0.0, 0.0, 0.0, 0.0, 3.0, 0.0], &[3, 2], &device)?;
/// let targets = RawTensor::from_indices(&[1, 99, 0], &[3], &device)?; // 99: padding
/// let weight = RawTensor::from_vec(vec![1.0, 3.0], &[2], &device)?;
/// let options = CrossEntropyOptions::default().weight(weight).ignore_index(99);
/// let mean = loss::cross_entropy_with(&logits, &targets, &options)?.item()?;
/// // (3·ln 2 + 1·ln(1 + e^-3)) / (3 + 1): the ignored row adds nothing, not even to the divisor.
/// let expected = (3.0 * 2f32.ln() + (-3f32).exp().ln_1p()) / 4.0;
/// assert!((mean - expected).abs() < 1e-6);
/// let per_row = loss::cross_entropy_with(&logits, &targets, &options.reduction(Reduction::None))?;
/// assert_eq!(per_row.shape(), [3]);
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn cross_entropy_with(logits: &RawTensor, targets: &RawTensor, options: &CrossEntropyOptions) -> Result<RawTensor> {
    logits.cross_entropy_with(targets, options)
}

/// Negative log-likelihood of log-probabilities `[n, c]` at u32 class targets `[n]`.
pub fn nll_loss(log_probs: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
    log_probs.nll_loss(targets)
}

/// Mean squared error of equally shaped tensors.
pub fn mse_loss(pred: &RawTensor, target: &RawTensor) -> Result<RawTensor> {
    pred.mse_loss(target)
}

/// Squared error of equally shaped tensors, reduced.
pub fn mse_loss_with(pred: &RawTensor, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
    pred.mse_loss_with(target, reduction)
}

/// Absolute error of equally shaped tensors, reduced.
pub fn l1_loss(pred: &RawTensor, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
    pred.l1_loss(target, reduction)
}

/// Huber loss with threshold `delta > 0`, reduced.
///
/// ```
/// use rumus::loss::{self, Reduction};
/// use rumus::{Device, RawTensor};
///
/// let device = Device::cpu();
/// let pred = RawTensor::from_vec(vec![0.5, 3.0], &[2], &device)?;
/// let target = RawTensor::zeros(&[2], &device)?;
/// let values = loss::huber_loss(&pred, &target, 1.0, Reduction::None)?.to_vec()?;
/// assert_eq!(values, [0.125, 2.5]); // 0.5²/2, then 1·(3 - 1/2)
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn huber_loss(pred: &RawTensor, target: &RawTensor, delta: f32, reduction: Reduction) -> Result<RawTensor> {
    pred.huber_loss(target, delta, reduction)
}

/// Smooth L1 loss with threshold `beta >= 0`, reduced.
pub fn smooth_l1_loss(pred: &RawTensor, target: &RawTensor, beta: f32, reduction: Reduction) -> Result<RawTensor> {
    pred.smooth_l1_loss(target, beta, reduction)
}

/// Binary cross-entropy of probabilities against targets in `[0, 1]`, reduced.
pub fn binary_cross_entropy(probs: &RawTensor, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
    probs.binary_cross_entropy(target, reduction)
}

/// Binary cross-entropy of logits against targets in `[0, 1]`, in the numerically stable form,
/// averaged.
pub fn bce_with_logits(logits: &RawTensor, target: &RawTensor) -> Result<RawTensor> {
    logits.bce_with_logits(target)
}

/// Binary cross-entropy of logits with an optional `pos_weight` (broadcast against the
/// target), reduced.
pub fn bce_with_logits_with(
    logits: &RawTensor,
    target: &RawTensor,
    pos_weight: Option<&RawTensor>,
    reduction: Reduction,
) -> Result<RawTensor> {
    logits.bce_with_logits_with(target, pos_weight, reduction)
}

/// KL divergence of `target` from the log-probabilities `log_probs`, reduced (use
/// [`Reduction::BatchMean`] for the per-sample divergence).
pub fn kl_div(log_probs: &RawTensor, target: &RawTensor, reduction: Reduction, log_target: bool) -> Result<RawTensor> {
    log_probs.kl_div(target, reduction, log_target)
}
