//! Training losses. Cross-entropy runs the device's fused kernel (log-softmax, pick, smoothing
//! in one pass) with its fused backward; MSE is composed from tensor ops.

use crate::autograd::BackwardOp;
use crate::backend::{CrossEntropyArgs, DType};
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
        Loss::CrossEntropy {
            label_smoothing: 0.0,
        }
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
                    Err(Error::invalid(
                        "Loss::CrossEntropy",
                        format!("label_smoothing {s} must be in [0, 1)"),
                    ))
                }
            }
            (Loss::Mse, TargetKind::Regression { .. }) => Ok(()),
            (loss, kind) => Err(Error::invalid(
                "fit",
                format!("loss {loss:?} cannot be used with {kind:?} targets"),
            )),
        }
    }

    /// The mean loss of a batch (a differentiable scalar).
    pub fn compute(&self, outputs: &RawTensor, targets: &RawTensor) -> Result<RawTensor> {
        match *self {
            Loss::CrossEntropy { label_smoothing } => {
                cross_entropy(outputs, targets, label_smoothing)?.mean_all()
            }
            Loss::Mse => {
                if outputs.shape() != targets.shape() {
                    return Err(Error::shape(
                        "mse",
                        format!(
                            "outputs {:?} and targets {:?} differ",
                            outputs.shape(),
                            targets.shape()
                        ),
                    ));
                }
                let diff = outputs.sub(targets)?;
                diff.mul(&diff)?.mean_all()
            }
        }
    }
}

struct CrossEntropyBackward {
    targets: RawTensor,
    args: CrossEntropyArgs,
}

impl BackwardOp for CrossEntropyBackward {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }

    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let logits = &inputs[0];
        let grad = grad.contiguous()?;
        let backend = logits.device().backend();
        let storage = backend.cross_entropy_backward(
            logits.storage(),
            self.targets.storage(),
            grad.storage(),
            &self.args,
        )?;
        Ok(vec![Some(RawTensor::from_kernel(
            storage,
            logits.shape(),
            logits.device(),
        ))])
    }
}

/// Per-row cross-entropy `[batch]` of logits `[batch, classes]` against u32 targets `[batch]`.
pub(crate) fn cross_entropy(
    logits: &RawTensor,
    targets: &RawTensor,
    smoothing: f32,
) -> Result<RawTensor> {
    let op = "cross_entropy";
    logits.check_f32(op)?;
    logits.check_same_device(op, targets)?;
    if targets.dtype() != DType::U32 {
        return Err(Error::DType {
            op,
            expected: "u32",
            got: targets.dtype().name(),
        });
    }
    if logits.rank() != 2 || targets.shape() != [logits.shape()[0]] {
        return Err(Error::shape(
            op,
            format!(
                "logits {:?} need shape [batch, classes] and targets [batch], got targets {:?}",
                logits.shape(),
                targets.shape()
            ),
        ));
    }
    let (rows, classes) = (logits.shape()[0], logits.shape()[1]);
    let targets = targets.contiguous()?;
    if targets.device().is_cpu() {
        // The kernel indexes by target; on the host a bad one would be out of bounds. (Reading a
        // CPU tensor is no transfer.)
        if let Some((position, &t)) = targets
            .to_vec_u32()?
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= classes)
        {
            return Err(Error::IndexOutOfRange {
                op,
                index: t as i64,
                limit: classes,
                position,
            });
        }
    }
    let x = logits.contiguous()?;
    let args = CrossEntropyArgs {
        rows,
        classes,
        smoothing,
    };
    let storage = x
        .device()
        .backend()
        .cross_entropy(x.storage(), targets.storage(), &args)?;
    Ok(RawTensor::from_op_contiguous(
        storage,
        &[rows],
        x.device(),
        &[&x],
        || {
            Box::new(CrossEntropyBackward {
                targets: targets.clone(),
                args,
            })
        },
    ))
}
