//! The losses `fit` can minimise, checked against the dataset's target kind when `fit` starts;
//! they delegate to [`crate::loss`] (every batch's loss is a mean, a scalar).

use std::fmt;
use std::sync::Arc;

use crate::data::TargetKind;
use crate::loss::{CrossEntropyOptions, Reduction};
use crate::{Error, RawTensor, Result};

/// The loss `fit` (and `evaluate_with`) minimises, reduced to a scalar per batch. The default
/// follows the dataset's targets: cross-entropy for class targets, mean squared error for
/// regression targets. Each loss needs one target kind, checked when `fit` starts
/// ([`Error::InvalidArgument`] naming the loss and the targets):
///
/// | loss | targets |
/// | --- | --- |
/// | `CrossEntropy`, `WeightedCrossEntropy` | [`Class`](crate::data::Class) / [`SeqClass`](crate::data::SeqClass): logits, one class index per row or position |
/// | `Mse`, `L1`, `Huber`, `SmoothL1` | [`Regression`](crate::data::Regression) of the output's shape |
/// | `Bce` (probabilities), `BceWithLogits` (logits) | `Regression` of the output's shape, values in `[0, 1]` (one output per binary label: `Regression<Shape1<1>>` for one label, `Shape1<K>` for K independent labels) |
/// | `KlDiv` | `Regression` of the output's shape: a distribution per sample; the output holds log-probabilities |
/// | `Custom` | any: the closure gets the raw outputs and targets |
///
/// The model's output is matched to the targets at compile time as for every `fit`.
#[derive(Clone, Debug, PartialEq)]
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
    /// Cross-entropy as [`Loss::CrossEntropy`] with PyTorch's class weights and ignored target
    /// ([`crate::loss::cross_entropy_with`]): each row's loss is scaled by its target's weight
    /// and the batch's loss is the sum divided by the summed weights of the rows not ignored.
    WeightedCrossEntropy {
        /// One finite, non-negative weight per class (checked against the target's classes when
        /// `fit` starts); `None`: all 1.
        weight: Option<Vec<f32>>,
        /// A target value that adds nothing (e.g. padding); other targets must be classes.
        ignore_index: Option<u32>,
        /// Smoothing `s` in `[0, 1)`.
        label_smoothing: f32,
    },
    /// Mean of squared differences over all elements (PyTorch's `MSELoss`).
    Mse,
    /// Mean of absolute differences (PyTorch's `L1Loss`).
    L1,
    /// Mean Huber loss with threshold `delta > 0` (PyTorch's `HuberLoss`).
    Huber {
        /// Where the loss turns from quadratic to linear.
        delta: f32,
    },
    /// Mean smooth L1 loss with threshold `beta >= 0` (PyTorch's `SmoothL1Loss`).
    SmoothL1 {
        /// Where the loss turns from quadratic to linear (0: the L1 loss).
        beta: f32,
    },
    /// Mean binary cross-entropy of probabilities (a sigmoid output) against targets in
    /// `[0, 1]` (PyTorch's `BCELoss`, logs floored at -100).
    Bce,
    /// Mean binary cross-entropy of logits against targets in `[0, 1]`, stable for any logit
    /// (PyTorch's `BCEWithLogitsLoss`).
    BceWithLogits {
        /// Weight of the positive term per label (the output's last axis), e.g.
        /// `negatives / positives` for an imbalanced label; `None`: all 1.
        pos_weight: Option<Vec<f32>>,
    },
    /// KL divergence of the target distributions from the output's log-probabilities, summed
    /// over each sample and averaged over the batch (PyTorch's `KLDivLoss(reduction='batchmean')`).
    KlDiv {
        /// Whether the targets are log-probabilities too.
        log_target: bool,
    },
    /// A user-written loss: see [`Loss::custom`] and [`Fit::loss_fn`](super::Fit::loss_fn).
    Custom(CustomLoss),
}

/// The function of a [`Loss::Custom`]: the raw outputs and targets of a batch to a
/// differentiable scalar.
pub type LossFn = dyn Fn(&RawTensor, &RawTensor) -> Result<RawTensor> + Send + Sync;

/// A user-written loss: a closure over the model's raw outputs and the batch's targets (u32
/// class indices or f32 values, as the dataset's target kind says) that returns a
/// differentiable scalar (rank 0, or one element). Two are equal when they share the closure.
#[derive(Clone)]
pub struct CustomLoss(Arc<LossFn>);

impl fmt::Debug for CustomLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CustomLoss(..)")
    }
}

impl PartialEq for CustomLoss {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Loss {
    /// Cross-entropy without label smoothing.
    pub fn cross_entropy() -> Self {
        Loss::CrossEntropy { label_smoothing: 0.0 }
    }

    /// Cross-entropy with one weight per class.
    pub fn weighted_cross_entropy(weight: Vec<f32>) -> Self {
        Loss::WeightedCrossEntropy { weight: Some(weight), ignore_index: None, label_smoothing: 0.0 }
    }

    /// A user-written loss (see [`CustomLoss`]).
    ///
    /// ```
    /// use rumus::train::Loss;
    ///
    /// // Mean absolute error of the outputs, written by hand.
    /// let mae = Loss::custom(|outputs, targets| outputs.sub(targets)?.abs()?.mean_all());
    /// assert!(matches!(mae, Loss::Custom(_)));
    /// ```
    pub fn custom(f: impl Fn(&RawTensor, &RawTensor) -> Result<RawTensor> + Send + Sync + 'static) -> Self {
        Loss::Custom(CustomLoss(Arc::new(f)))
    }

    pub(crate) fn default_for(kind: TargetKind) -> Self {
        match kind {
            TargetKind::Class { .. } => Loss::cross_entropy(),
            TargetKind::Regression { .. } => Loss::Mse,
        }
    }

    /// The loss's name in errors.
    fn name(&self) -> &'static str {
        match self {
            Loss::CrossEntropy { .. } => "CrossEntropy",
            Loss::WeightedCrossEntropy { .. } => "WeightedCrossEntropy",
            Loss::Mse => "Mse",
            Loss::L1 => "L1",
            Loss::Huber { .. } => "Huber",
            Loss::SmoothL1 { .. } => "SmoothL1",
            Loss::Bce => "Bce",
            Loss::BceWithLogits { .. } => "BceWithLogits",
            Loss::KlDiv { .. } => "KlDiv",
            Loss::Custom(_) => "Custom",
        }
    }

    /// Checks that this loss can be computed against targets of `kind`, and its settings.
    pub(crate) fn check(&self, kind: TargetKind) -> Result<()> {
        const OP: &str = "fit";
        let smoothing = |s: f32| {
            if (0.0..1.0).contains(&s) {
                Ok(())
            } else {
                Err(Error::invalid("Loss::CrossEntropy", format!("label_smoothing {s} must be in [0, 1)")))
            }
        };
        let wrong_kind = || {
            let needs = match self {
                Loss::CrossEntropy { .. } | Loss::WeightedCrossEntropy { .. } => "class targets (Class or SeqClass)",
                _ => "Regression targets of the output's shape",
            };
            Err(Error::invalid(OP, format!("loss {} needs {needs}, got {kind:?} targets", self.name())))
        };
        match (self, kind) {
            (Loss::Custom(_), _) => Ok(()),
            (Loss::CrossEntropy { label_smoothing }, TargetKind::Class { .. }) => smoothing(*label_smoothing),
            (Loss::WeightedCrossEntropy { weight, label_smoothing, .. }, TargetKind::Class { classes }) => {
                smoothing(*label_smoothing)?;
                if let Some(weight) = weight {
                    check_weights("Loss::WeightedCrossEntropy", "weight", weight, classes, "classes")?;
                }
                Ok(())
            }
            (Loss::CrossEntropy { .. } | Loss::WeightedCrossEntropy { .. }, _) => wrong_kind(),
            (_, TargetKind::Class { .. }) => wrong_kind(),
            (Loss::Huber { delta }, _) if !(delta.is_finite() && *delta > 0.0) => {
                Err(Error::invalid("Loss::Huber", format!("delta {delta} must be finite and > 0")))
            }
            (Loss::SmoothL1 { beta }, _) if !(beta.is_finite() && *beta >= 0.0) => {
                Err(Error::invalid("Loss::SmoothL1", format!("beta {beta} must be finite and >= 0")))
            }
            (Loss::BceWithLogits { pos_weight: Some(pw) }, TargetKind::Regression { dims }) => {
                let labels = dims.last().copied().unwrap_or(1);
                check_weights("Loss::BceWithLogits", "pos_weight", pw, labels, "labels (the output's last axis)")
            }
            _ => Ok(()),
        }
    }

    /// The mean loss of a batch (a differentiable scalar).
    pub fn compute(&self, outputs: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
        let mean = Reduction::Mean;
        match self {
            Loss::CrossEntropy { label_smoothing } => {
                let (logits, targets) = class_rows("cross_entropy", outputs, targets)?;
                crate::loss::cross_entropy(&logits, &targets, *label_smoothing)
            }
            Loss::WeightedCrossEntropy { weight, ignore_index, label_smoothing } => {
                let weight = weight.as_ref().map(|w| RawTensor::from_vec(w.clone(), &[w.len()], outputs.device()));
                let options = CrossEntropyOptions {
                    weight: weight.transpose()?,
                    ignore_index: *ignore_index,
                    label_smoothing: *label_smoothing,
                    reduction: mean,
                };
                // The weights' values were checked when fit started: no read-back per batch.
                outputs.cross_entropy_checked(targets, &options, false)
            }
            Loss::Mse => outputs.mse_loss(targets),
            Loss::L1 => outputs.l1_loss(targets, mean),
            Loss::Huber { delta } => outputs.huber_loss(targets, *delta, mean),
            Loss::SmoothL1 { beta } => outputs.smooth_l1_loss(targets, *beta, mean),
            Loss::Bce => outputs.binary_cross_entropy(targets, mean),
            Loss::BceWithLogits { pos_weight: None } => outputs.bce_with_logits(targets),
            Loss::BceWithLogits { pos_weight: Some(pw) } => {
                let pw = RawTensor::from_vec(pw.clone(), &[pw.len()], outputs.device())?;
                outputs.bce_with_logits_with(targets, Some(&pw), mean)
            }
            Loss::KlDiv { log_target } => outputs.kl_div(targets, Reduction::BatchMean, *log_target),
            Loss::Custom(CustomLoss(f)) => {
                let loss = f(outputs, targets)?;
                if loss.numel() != 1 || loss.dtype() != crate::ops::DType::F32 {
                    return Err(Error::shape(
                        "Loss::Custom",
                        format!(
                            "the loss function must return one f32 value (a scalar), got {} shape {:?}",
                            loss.dtype().name(),
                            loss.shape()
                        ),
                    ));
                }
                if loss.rank() == 0 {
                    Ok(loss)
                } else {
                    loss.reshape(&[])
                }
            }
        }
    }
}

/// `len` finite, non-negative weights.
fn check_weights(op: &'static str, what: &str, weights: &[f32], len: usize, per: &str) -> Result<()> {
    if weights.len() != len {
        return Err(Error::invalid(op, format!("{what} has {} values, the targets have {len} {per}", weights.len())));
    }
    match weights.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w >= 0.0)) {
        Some((i, w)) => Err(Error::invalid(op, format!("{what}[{i}] is {w}: weights must be finite and >= 0"))),
        None => Ok(()),
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
