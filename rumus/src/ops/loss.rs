//! Loss functions, each reduced to the mean over its elements (a rank-0 tensor).
//! Also available as free functions in [`crate::loss`].

use super::index::check_index_tensor;
use crate::autograd::BackwardOp;
use crate::backend::CrossEntropyArgs;
use crate::tensor::RawTensor;
use crate::{no_grad, Error, Result};

/// Backward of the fused per-row cross-entropy kernel: `g_r · (softmax(x_r) - q_r)`.
struct CrossEntropyBackward {
    targets: RawTensor,
    args: CrossEntropyArgs,
}

impl BackwardOp for CrossEntropyBackward {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (logits, grad) = (&inputs[0], grad.contiguous()?);
        let backend = logits.device().backend();
        let storage =
            backend.cross_entropy_backward(logits.storage(), self.targets.storage(), grad.storage(), &self.args)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, logits.shape(), logits.device()))])
    }
}

/// `d/dx = sigmoid(x) - t`, `d/dt = -x`: exact at `x = 0`, where the stable forward's
/// `max`/`abs` kinks would give autograd a wrong one-sided derivative.
struct BceWithLogitsBackward;

impl BackwardOp for BceWithLogitsBackward {
    fn name(&self) -> &'static str {
        "bce_with_logits"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, t) = (&inputs[0], &inputs[1]);
        let gx = grad.mul(&x.sigmoid()?.sub(t)?)?;
        let gt = grad.mul(&x.neg()?)?;
        Ok(vec![Some(gx), Some(gt)])
    }
}

/// Checks `[n, c]` scores against u32 targets `[n]` with classes in range.
fn check_class_targets(op: &'static str, scores: &RawTensor, targets: &RawTensor) -> Result<(usize, usize)> {
    scores.check_f32(op)?;
    check_index_tensor(op, scores, targets)?;
    if scores.rank() != 2 || targets.rank() != 1 || targets.shape()[0] != scores.shape()[0] {
        return Err(Error::shape(
            op,
            format!(
                "input {:?} targets {:?}: expected input [batch, classes] and targets [batch]",
                scores.shape(),
                targets.shape()
            ),
        ));
    }
    let (rows, classes) = (scores.shape()[0], scores.shape()[1]);
    if rows == 0 || classes == 0 {
        return Err(Error::shape(op, format!("input {:?}: needs at least one row and one class", scores.shape())));
    }
    // The targets' range is checked by the kernels that read them (cross-entropy, gather).
    Ok((rows, classes))
}

/// Same f32 shape, same device.
fn check_pair(op: &'static str, pred: &RawTensor, target: &RawTensor) -> Result<()> {
    pred.check_f32(op)?;
    target.check_f32(op)?;
    pred.check_same_device(op, target)?;
    if pred.shape() != target.shape() {
        return Err(Error::shape(
            op,
            format!("input {:?} target {:?}: shapes must be equal", pred.shape(), target.shape()),
        ));
    }
    if pred.numel() == 0 {
        return Err(Error::shape(op, "the mean of an empty input is undefined"));
    }
    Ok(())
}

impl RawTensor {
    /// Mean cross-entropy of logits `[n, c]` against u32 class targets `[n]`, with label
    /// smoothing `s` in `[0, 1)` (target distribution `(1-s)·onehot + s/c`). One fused kernel
    /// computes log-softmax and the loss per row, stable for any logit magnitude. Targets are
    /// range-checked on every device ([`Error::IndexOutOfRange`]).
    pub fn cross_entropy(&self, targets: &RawTensor, label_smoothing: f32) -> Result<RawTensor> {
        const OP: &str = "cross_entropy";
        let (rows, classes) = check_class_targets(OP, self, targets)?;
        if !(0.0..1.0).contains(&label_smoothing) {
            return Err(Error::invalid(OP, format!("label smoothing {label_smoothing} must be in [0, 1)")));
        }
        let args = CrossEntropyArgs { rows, classes, smoothing: label_smoothing };
        let (logits, targets) = (self.contiguous()?, targets.contiguous()?);
        let per_row = logits.device().backend().cross_entropy(logits.storage(), targets.storage(), &args)?;
        let per_row = RawTensor::from_op_contiguous(per_row, &[rows], logits.device(), &[&logits], || {
            Box::new(CrossEntropyBackward { targets, args })
        });
        per_row.mean_all()
    }

    /// Mean negative log-likelihood of log-probabilities `[n, c]` at u32 class targets `[n]`.
    pub fn nll_loss(&self, targets: &RawTensor) -> Result<RawTensor> {
        let (rows, _) = check_class_targets("nll_loss", self, targets)?;
        let picked = super::index::renamed("nll_loss", self.gather(1, &targets.reshape(&[rows, 1])?))?;
        picked.mean_all()?.neg()
    }

    /// Mean squared error; `self` and `target` must have the same shape.
    pub fn mse_loss(&self, target: &RawTensor) -> Result<RawTensor> {
        check_pair("mse_loss", self, target)?;
        let diff = self.sub(target)?;
        diff.mul(&diff)?.mean_all()
    }

    /// Mean binary cross-entropy of logits against targets in `[0, 1]` (same shape), in the
    /// stable form `max(x, 0) - x·t + log(1 + exp(-|x|))`.
    pub fn bce_with_logits(&self, target: &RawTensor) -> Result<RawTensor> {
        check_pair("bce_with_logits", self, target)?;
        let x = self;
        let elementwise = no_grad(|| -> Result<RawTensor> {
            let softplus_tail = x.abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?;
            x.relu()?.sub(&x.mul(target)?)?.add(&softplus_tail)
        })?;
        let elementwise = RawTensor::from_op(
            elementwise.storage().clone(),
            elementwise.layout().clone(),
            x.device().clone(),
            &[x, target],
            || Box::new(BceWithLogitsBackward),
        );
        elementwise.mean_all()
    }
}
