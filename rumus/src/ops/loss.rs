//! Class losses (cross-entropy with PyTorch's options, negative log-likelihood) and the
//! [`Reduction`] every loss takes; the elementwise losses are in `pointwise_loss.rs`.
//! Also available as free functions in [`crate::loss`].

use super::index::check_index_tensor;
use crate::autograd::BackwardOp;
use crate::backend::CrossEntropyArgs;
use crate::layout::Layout;
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// How a loss reduces its per-element (or, for class losses, per-row) values (PyTorch's
/// `reduction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The mean (a rank-0 tensor); for weighted cross-entropy, the sum divided by the summed
    /// weights of the rows that are not ignored, as PyTorch does.
    #[default]
    Mean,
    /// The sum (a rank-0 tensor).
    Sum,
    /// No reduction: the per-element values (per-row for class losses), in the input's shape.
    None,
    /// The sum divided by the batch size (the first axis): KL divergence only, where it is the
    /// mathematically correct per-sample value (PyTorch's `'batchmean'`).
    BatchMean,
}

impl Reduction {
    /// Reduces per-element values as `self` says; `BatchMean` is refused (KL divergence handles
    /// it itself).
    pub(crate) fn apply(self, op: &'static str, values: RawTensor) -> Result<RawTensor> {
        match self {
            Reduction::Mean => values.mean_all(),
            Reduction::Sum => values.sum_all(),
            Reduction::None => Ok(values),
            Reduction::BatchMean => {
                Err(Error::invalid(op, "reduction BatchMean is only defined for kl_div (use Mean or Sum)"))
            }
        }
    }
}

/// The options of [`RawTensor::cross_entropy_with`], PyTorch's `F.cross_entropy` arguments.
///
/// ```
/// use rumus::loss::{CrossEntropyOptions, Reduction};
/// use rumus::{Device, RawTensor};
///
/// let device = Device::cpu();
/// let weight = RawTensor::from_vec(vec![1.0, 3.0], &[2], &device)?;
/// let options = CrossEntropyOptions::default().weight(weight).ignore_index(7).reduction(Reduction::Mean);
/// assert_eq!(options.ignore_index, Some(7));
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct CrossEntropyOptions {
    /// Per-class weights `[classes]`, finite and non-negative (not differentiated). Each row's
    /// loss is scaled by its target's weight; the mean divides by the sum of those weights.
    pub weight: Option<RawTensor>,
    /// A target value whose rows add nothing to the loss, the gradient or the mean's divisor
    /// (PyTorch's `ignore_index`; any u32, e.g. a padding id). Other targets must be below the
    /// number of classes.
    pub ignore_index: Option<u32>,
    /// Smoothing `s` in `[0, 1)`: the target distribution is `(1-s)·onehot + s/classes`.
    pub label_smoothing: f32,
    /// How the per-row losses are reduced (default: mean).
    pub reduction: Reduction,
}

impl CrossEntropyOptions {
    /// Sets the per-class weights `[classes]`.
    pub fn weight(mut self, weight: RawTensor) -> Self {
        self.weight = Some(weight);
        self
    }
    /// Sets the ignored target value.
    pub fn ignore_index(mut self, index: u32) -> Self {
        self.ignore_index = Some(index);
        self
    }
    /// Sets the label smoothing, in `[0, 1)`.
    pub fn label_smoothing(mut self, s: f32) -> Self {
        self.label_smoothing = s;
        self
    }
    /// Sets the reduction.
    pub fn reduction(mut self, reduction: Reduction) -> Self {
        self.reduction = reduction;
        self
    }
}

/// Backward of the fused per-row cross-entropy kernel: `g_r · (A·softmax(x_r) - q_r)` (see
/// [`CrossEntropyArgs`]).
struct CrossEntropyBackward {
    targets: RawTensor,
    weight: Option<RawTensor>,
    args: CrossEntropyArgs,
}

impl BackwardOp for CrossEntropyBackward {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (logits, grad) = (&inputs[0], grad.contiguous()?);
        let backend = logits.device().backend();
        let storage = backend.cross_entropy_backward(
            logits.storage(),
            self.targets.storage(),
            self.weight.as_ref().map(|w| w.storage()),
            grad.storage(),
            &self.args,
        )?;
        Ok(vec![Some(RawTensor::from_kernel(storage, logits.shape(), logits.device()))])
    }
}

/// Checks `[n, c]` scores against u32 targets `[n]` (ranges are checked by the kernels).
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

/// Logits `[.., classes]` and targets `[..]` as rows `[positions, classes]` and `[positions]`;
/// rank 2 or less passes through (the row check names the shapes).
fn as_rows(op: &'static str, logits: &RawTensor, targets: &RawTensor) -> Result<(RawTensor, RawTensor)> {
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

/// Class weights: f32 `[classes]` on the logits' device, and (when `check_values`) finite and
/// non-negative, which reads them to the host.
fn check_weight(
    op: &'static str,
    weight: &RawTensor,
    logits: &RawTensor,
    classes: usize,
    check_values: bool,
) -> Result<()> {
    weight.check_f32(op)?;
    logits.check_same_device(op, weight)?;
    if weight.shape() != [classes] {
        return Err(Error::shape(
            op,
            format!("weight {:?}: expected one weight per class, [{classes}]", weight.shape()),
        ));
    }
    if check_values {
        let values = weight.to_vec()?;
        if let Some((class, w)) = values.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w >= 0.0)) {
            return Err(Error::invalid(op, format!("weight of class {class} is {w}: weights must be finite and >= 0")));
        }
    }
    Ok(())
}

impl RawTensor {
    /// Mean cross-entropy of logits `[n, c]` against u32 class targets `[n]`, with label
    /// smoothing `s` in `[0, 1)` (target distribution `(1-s)·onehot + s/c`). One fused kernel
    /// computes log-softmax and the loss per row, stable for any logit magnitude. Targets are
    /// range-checked on every device ([`Error::IndexOutOfRange`]). See
    /// [`cross_entropy_with`](RawTensor::cross_entropy_with) for weights, an ignored target and
    /// other reductions.
    pub fn cross_entropy(&self, targets: &RawTensor, label_smoothing: f32) -> Result<RawTensor> {
        self.cross_entropy_with(targets, &CrossEntropyOptions::default().label_smoothing(label_smoothing))
    }

    /// Cross-entropy of logits `[.., classes]` (class axis last; `[n, c]`, or `[batch, T, c]`
    /// for per-position targets) against u32 targets `[..]` (the logits' leading axes), with
    /// PyTorch's `weight`, `ignore_index`, `label_smoothing` and `reduction`
    /// (`F.cross_entropy(logits.view(-1, c), targets.view(-1), ...)`): row `r` with target `t`
    /// costs `(1-s)·w[t]·(lse - x[t]) + (s/c)·Σ_j w[j]·(lse - x[j])`, an ignored row nothing;
    /// [`Reduction::Mean`] divides the sum by `Σ w[t]` over the rows not ignored (NaN when every
    /// row is ignored, as in PyTorch), [`Reduction::None`] keeps the targets' shape. One fused
    /// kernel (CPU and wgpu), stable for any logit magnitude.
    ///
    /// Errors: shapes that do not match, a target `>= c` other than `ignore_index`
    /// ([`Error::IndexOutOfRange`]), weights not `[c]` or negative or not finite (their values
    /// are read to the host to check them), smoothing outside `[0, 1)`, `BatchMean`.
    pub fn cross_entropy_with(&self, targets: &RawTensor, options: &CrossEntropyOptions) -> Result<RawTensor> {
        self.cross_entropy_checked(targets, options, true)
    }

    /// [`cross_entropy_with`](RawTensor::cross_entropy_with), reading the weights' values to
    /// check them only when `check_weight_values` (a caller that checked them on the host
    /// already, as `fit` does, skips the transfer).
    pub(crate) fn cross_entropy_checked(
        &self,
        targets: &RawTensor,
        options: &CrossEntropyOptions,
        check_weight_values: bool,
    ) -> Result<RawTensor> {
        const OP: &str = "cross_entropy";
        let s = options.label_smoothing;
        if !(0.0..1.0).contains(&s) {
            return Err(Error::invalid(OP, format!("label smoothing {s} must be in [0, 1)")));
        }
        if options.reduction == Reduction::BatchMean {
            return Err(Error::invalid(OP, "reduction BatchMean is only defined for kl_div (use Mean or Sum)"));
        }
        let (logits, rows_targets) = as_rows(OP, self, targets)?;
        let (rows, classes) = check_class_targets(OP, &logits, &rows_targets)?;
        if let Some(w) = &options.weight {
            check_weight(OP, w, &logits, classes, check_weight_values)?;
        }
        let weight = options.weight.as_ref().map(RawTensor::contiguous).transpose()?;
        let args = CrossEntropyArgs {
            rows,
            classes,
            smoothing: s,
            weighted: weight.is_some(),
            ignore_index: options.ignore_index,
        };
        let (logits, rows_targets) = (logits.contiguous()?, rows_targets.contiguous()?);
        let device = logits.device().clone();
        let out = device.backend().cross_entropy(
            logits.storage(),
            rows_targets.storage(),
            weight.as_ref().map(|w| w.storage()),
            &args,
        )?;
        // The kernel's output holds the rows' losses, then (weighted or ignoring) the rows'
        // weights, the divisor of the mean.
        let row_weights = (args.outputs_per_row() == 2)
            .then(|| {
                Layout::new(vec![rows], vec![1], rows).map(|l| RawTensor::from_storage(out.clone(), l, device.clone()))
            })
            .transpose()?;
        let per_row = RawTensor::from_op_contiguous(out, &[rows], &device, &[&logits], || {
            Box::new(CrossEntropyBackward { targets: rows_targets, weight, args })
        });
        match options.reduction {
            Reduction::Mean => match row_weights {
                None => per_row.mean_all(),
                Some(row_weights) => per_row.sum_all()?.div(&row_weights.sum_all()?),
            },
            Reduction::Sum => per_row.sum_all(),
            _ if self.rank() > 2 => per_row.reshape(targets.shape()),
            _ => Ok(per_row),
        }
    }

    /// Mean negative log-likelihood of log-probabilities `[n, c]` at u32 class targets `[n]`.
    pub fn nll_loss(&self, targets: &RawTensor) -> Result<RawTensor> {
        let (rows, _) = check_class_targets("nll_loss", self, targets)?;
        let picked = super::index::renamed("nll_loss", self.gather(1, &targets.reshape(&[rows, 1])?))?;
        picked.mean_all()?.neg()
    }
}
