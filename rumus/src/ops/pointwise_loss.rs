//! Elementwise losses of a prediction against a target of the same shape (squared and absolute
//! error, Huber and smooth L1, binary cross-entropy of probabilities or logits, KL divergence),
//! composed from differentiable ops (or, where a kink or a clamp would give autograd a wrong
//! derivative, with their own backward rule) and reduced by a [`Reduction`].
//! Also available as free functions in [`crate::loss`].

use super::loss::Reduction;
use crate::autograd::BackwardOp;
use crate::tensor::RawTensor;
use crate::{no_grad, Error, Result};

/// PyTorch's floor on `log(p)` and `log(1 - p)` in binary cross-entropy.
const BCE_LOG_FLOOR: f32 = -100.0;
/// PyTorch's floor on `p·(1 - p)` in binary cross-entropy's gradient.
const BCE_GRAD_EPS: f32 = 1e-12;

/// Same f32 shape, same device, at least one element.
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
        return Err(Error::shape(op, "the loss of an empty input is undefined"));
    }
    Ok(())
}

/// Elementwise values computed without a graph, recorded as one op of `inputs` with `backward`.
fn recorded(values: RawTensor, inputs: &[&RawTensor], backward: impl FnOnce() -> Box<dyn BackwardOp>) -> RawTensor {
    let device = values.device().clone();
    RawTensor::from_op(values.storage().clone(), values.layout().clone(), device, inputs, backward)
}

/// `d/dx = (1-t) - lw·sigmoid(-x)`, `d/dt = -x + (pw-1)·softplus(-x)` with
/// `lw = 1 + (pw-1)·t`: exact at `x = 0`, where the stable forward's `max`/`abs` kinks would
/// give autograd a wrong one-sided derivative. The positive weight is not differentiated.
struct BceWithLogitsBackward {
    pos_weight: Option<RawTensor>,
}

impl BackwardOp for BceWithLogitsBackward {
    fn name(&self) -> &'static str {
        "bce_with_logits"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, t) = (&inputs[0], &inputs[1]);
        let (gx, gt) = match &self.pos_weight {
            None => (x.sigmoid()?.sub(t)?, x.neg()?),
            Some(pw) => {
                let pw_minus_1 = pw.add_scalar(-1.0)?;
                let lw = t.mul(&pw_minus_1)?.add_scalar(1.0)?;
                let gx = t.neg()?.add_scalar(1.0)?.sub(&lw.mul(&x.neg()?.sigmoid()?)?)?;
                let gt = softplus_neg(x)?.mul(&pw_minus_1)?.sub(x)?;
                (gx, gt)
            }
        };
        Ok(vec![Some(grad.mul(&gx)?), Some(grad.mul(&gt)?)])
    }
}

/// `softplus(-x) = log(1 + exp(-|x|)) + max(-x, 0)`, stable for any `x`.
fn softplus_neg(x: &RawTensor) -> Result<RawTensor> {
    x.abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?.add(&x.neg()?.relu()?)
}

/// `log(p)` and `log(1-p)`, each floored at -100 as PyTorch does.
fn bce_logs(p: &RawTensor) -> Result<(RawTensor, RawTensor)> {
    let log_p = p.log()?.clamp(BCE_LOG_FLOOR, f32::INFINITY)?;
    let log_q = p.neg()?.add_scalar(1.0)?.log()?.clamp(BCE_LOG_FLOOR, f32::INFINITY)?;
    Ok((log_p, log_q))
}

/// PyTorch's gradients of binary cross-entropy: `d/dp = (p - t) / max(p·(1-p), 1e-12)`,
/// `d/dt = log(1-p) - log(p)` (`-logit(p)`, not floored: ±inf at `p` of 0 or 1, as in PyTorch).
struct BinaryCrossEntropyBackward;

impl BackwardOp for BinaryCrossEntropyBackward {
    fn name(&self) -> &'static str {
        "binary_cross_entropy"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (p, t) = (&inputs[0], &inputs[1]);
        let var = p.mul(&p.neg()?.add_scalar(1.0)?)?.clamp(BCE_GRAD_EPS, f32::INFINITY)?;
        let gp = grad.mul(&p.sub(t)?.div(&var)?)?;
        let gt = grad.mul(&p.neg()?.add_scalar(1.0)?.log()?.sub(&p.log()?)?)?;
        Ok(vec![Some(gp), Some(gt)])
    }
}

impl RawTensor {
    /// Mean squared error; `self` and `target` must have the same shape.
    pub fn mse_loss(&self, target: &RawTensor) -> Result<RawTensor> {
        self.mse_loss_with(target, Reduction::Mean)
    }

    /// Squared error `(x - y)²` of equally shaped tensors, reduced (PyTorch's `F.mse_loss`).
    pub fn mse_loss_with(&self, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
        const OP: &str = "mse_loss";
        check_pair(OP, self, target)?;
        let diff = self.sub(target)?;
        reduction.apply(OP, diff.mul(&diff)?)
    }

    /// Absolute error `|x - y|` of equally shaped tensors, reduced (PyTorch's `F.l1_loss`; the
    /// gradient at `x = y` is 0).
    pub fn l1_loss(&self, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
        const OP: &str = "l1_loss";
        check_pair(OP, self, target)?;
        reduction.apply(OP, self.sub(target)?.abs()?)
    }

    /// Huber loss (PyTorch's `F.huber_loss`): with `a = |x - y|`, `a²/2` where `a < delta`,
    /// else `delta·(a - delta/2)`; `delta` finite and `> 0`.
    pub fn huber_loss(&self, target: &RawTensor, delta: f32, reduction: Reduction) -> Result<RawTensor> {
        const OP: &str = "huber_loss";
        check_pair(OP, self, target)?;
        if !(delta.is_finite() && delta > 0.0) {
            return Err(Error::invalid(OP, format!("delta {delta} must be finite and > 0")));
        }
        reduction.apply(OP, huber(self, target, delta)?)
    }

    /// Smooth L1 loss (PyTorch's `F.smooth_l1_loss`): with `a = |x - y|`, `a²/(2·beta)` where
    /// `a < beta`, else `a - beta/2`; `beta` finite and `>= 0` (0 is the L1 loss).
    pub fn smooth_l1_loss(&self, target: &RawTensor, beta: f32, reduction: Reduction) -> Result<RawTensor> {
        const OP: &str = "smooth_l1_loss";
        check_pair(OP, self, target)?;
        if !(beta.is_finite() && beta >= 0.0) {
            return Err(Error::invalid(OP, format!("beta {beta} must be finite and >= 0")));
        }
        let values =
            if beta == 0.0 { self.sub(target)?.abs()? } else { huber(self, target, beta)?.mul_scalar(1.0 / beta)? };
        reduction.apply(OP, values)
    }

    /// Mean binary cross-entropy of logits against targets in `[0, 1]` (same shape), in the
    /// stable form `max(x, 0) - x·t + log(1 + exp(-|x|))`.
    pub fn bce_with_logits(&self, target: &RawTensor) -> Result<RawTensor> {
        self.bce_with_logits_with(target, None, Reduction::Mean)
    }

    /// Binary cross-entropy of logits against targets in `[0, 1]` of the same shape, with an
    /// optional `pos_weight` broadcast against them (typically `[classes]` for targets
    /// `[batch, classes]`; not differentiated), reduced (PyTorch's
    /// `F.binary_cross_entropy_with_logits`): `(1-t)·x + (1 + (pw-1)·t)·softplus(-x)`, stable
    /// for any logit.
    pub fn bce_with_logits_with(
        &self,
        target: &RawTensor,
        pos_weight: Option<&RawTensor>,
        reduction: Reduction,
    ) -> Result<RawTensor> {
        const OP: &str = "bce_with_logits";
        check_pair(OP, self, target)?;
        if let Some(pw) = pos_weight {
            pw.check_f32(OP)?;
            self.check_same_device(OP, pw)?;
            let joint = crate::layout::broadcast_shapes(OP, target.shape(), pw.shape())?;
            if joint != target.shape() {
                return Err(Error::shape(
                    OP,
                    format!("pos_weight {:?} must broadcast to the target {:?}", pw.shape(), target.shape()),
                ));
            }
        }
        let (x, t) = (self, target);
        let values = no_grad(|| -> Result<RawTensor> {
            let tail = softplus_neg(x)?;
            let tail = match pos_weight {
                None => tail,
                Some(pw) => tail.mul(&t.mul(&pw.add_scalar(-1.0)?)?.add_scalar(1.0)?)?,
            };
            t.neg()?.add_scalar(1.0)?.mul(x)?.add(&tail)
        })?;
        let pos_weight = pos_weight.cloned();
        reduction.apply(OP, recorded(values, &[x, t], || Box::new(BceWithLogitsBackward { pos_weight })))
    }

    /// Binary cross-entropy of probabilities `p` in `[0, 1]` against targets in `[0, 1]` of the
    /// same shape, reduced (PyTorch's `F.binary_cross_entropy`):
    /// `-(t·log(p) + (1-t)·log(1-p))` with each log floored at -100, so `p` of exactly 0 or 1
    /// gives a finite loss; the gradient is PyTorch's `(p - t) / max(p·(1-p), 1e-12)`. Prefer
    /// [`bce_with_logits_with`](RawTensor::bce_with_logits_with) on logits: it is stable where
    /// a sigmoid's output rounds to 0 or 1. Values outside `[0, 1]` are not checked (they give
    /// NaN).
    pub fn binary_cross_entropy(&self, target: &RawTensor, reduction: Reduction) -> Result<RawTensor> {
        const OP: &str = "binary_cross_entropy";
        check_pair(OP, self, target)?;
        let (p, t) = (self, target);
        let values = no_grad(|| -> Result<RawTensor> {
            let (log_p, log_q) = bce_logs(p)?;
            t.mul(&log_p.sub(&log_q)?)?.add(&log_q)?.neg()
        })?;
        reduction.apply(OP, recorded(values, &[p, t], || Box::new(BinaryCrossEntropyBackward)))
    }

    /// Kullback-Leibler divergence of the target distribution from `self`, which holds
    /// log-probabilities (PyTorch's `F.kl_div(input, target, reduction, log_target)`):
    /// elementwise `t·(log t - x)` (0 where `t = 0`), or with `log_target` (targets given as
    /// log-probabilities) `exp(t)·(t - x)`. [`Reduction::BatchMean`] divides the sum by the
    /// first axis (the batch), which is the true KL divergence per sample;
    /// [`Reduction::Mean`] divides by the number of elements, as PyTorch's `'mean'` does.
    pub fn kl_div(&self, target: &RawTensor, reduction: Reduction, log_target: bool) -> Result<RawTensor> {
        const OP: &str = "kl_div";
        check_pair(OP, self, target)?;
        let (x, t) = (self, target);
        let values = no_grad(|| if log_target { t.exp()?.mul(&t.sub(x)?) } else { t.mul(&safe_log(t)?.sub(x)?) })?;
        let values = recorded(values, &[x, t], || Box::new(KlDivBackward { log_target }));
        match reduction {
            Reduction::BatchMean => {
                let batch = self.shape().first().copied().unwrap_or(1);
                values.sum_all()?.mul_scalar(1.0 / batch as f32)
            }
            other => other.apply(OP, values),
        }
    }
}

/// `log(max(t, tiny))`: exact for every normal `t >= 0`, and finite at 0 (where the KL terms
/// multiply it by 0).
fn safe_log(t: &RawTensor) -> Result<RawTensor> {
    t.clamp(f32::MIN_POSITIVE, f32::INFINITY)?.log()
}

/// PyTorch's gradients of `kl_div`: `d/dx = -t` and `d/dt = log(t) + 1 - x` (0 where `t = 0`,
/// where PyTorch's `xlogy` gives 0/0 = NaN),
/// or with `log_target` `d/dx = -exp(t)` and `d/dt = exp(t)·(t + 1 - x)`.
struct KlDivBackward {
    log_target: bool,
}

impl BackwardOp for KlDivBackward {
    fn name(&self) -> &'static str {
        "kl_div"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, t) = (&inputs[0], &inputs[1]);
        let (gx, gt) = if self.log_target {
            let e = t.exp()?;
            (e.neg()?, e.mul(&t.sub(x)?.add_scalar(1.0)?)?)
        } else {
            // 1 where t > 0 (every normal t: t·MAX >= 1), 0 where t = 0.
            let positive = t.mul_scalar(f32::MAX)?.clamp(0.0, 1.0)?;
            (t.neg()?, safe_log(t)?.add_scalar(1.0)?.sub(x)?.mul(&positive)?)
        };
        Ok(vec![Some(grad.mul(&gx)?), Some(grad.mul(&gt)?)])
    }
}

/// Huber values `m·(a - m/2)` with `a = |x - y|`, `m = min(a, delta)`: `a²/2` inside `delta`,
/// `delta·(a - delta/2)` outside, with the exact gradient on both sides (and 0 at `a = 0`).
fn huber(x: &RawTensor, y: &RawTensor, delta: f32) -> Result<RawTensor> {
    let a = x.sub(y)?.abs()?;
    let m = a.clamp(0.0, delta)?;
    m.mul(&a.sub(&m.mul_scalar(0.5)?)?)
}
