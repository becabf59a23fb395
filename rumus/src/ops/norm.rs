//! Batch, layer, group and RMS normalisation. Batch normalisation runs the device's fused
//! kernels where it has them ([`Backend::batch_norm`](crate::backend::Backend::batch_norm), the
//! CPU and wgpu), and is composed from elementwise ops and reductions elsewhere (its backward then from
//! autograd), the composed form kept as [`RawTensor::batch_norm_reference`]; layer normalisation runs the device's
//! fused kernels ([`Backend::layer_norm`](crate::backend::Backend::layer_norm)), with the composed
//! [`RawTensor::layer_norm_reference`] kept as the reference they are tested against. Group
//! (and instance) normalisation is the fused layer norm of each group's slab, then a per-channel
//! affine map; RMS normalisation has fused kernels of its own
//! ([`Backend::rms_norm`](crate::backend::Backend::rms_norm)). Batch normalisation followed by
//! a ReLU, [`RawTensor::batch_norm_relu`], is the same kernels with the ReLU in their passes.

use crate::autograd::BackwardOp;
use crate::backend::{BatchNormArgs, LayerNormArgs};
use crate::tensor::RawTensor;
use crate::{no_grad, Error, Result};

/// The fused layer norm's backward: `dx` from one kernel, `dweight = Σ_rows dy·x̂` and
/// `dbias = Σ_rows dy` from another (one pass for both, rows summed in a fixed order:
/// deterministic).
struct LayerNormBackward {
    mean: RawTensor,
    rstd: RawTensor,
    args: LayerNormArgs,
    has_weight: bool,
    has_bias: bool,
}

impl BackwardOp for LayerNormBackward {
    fn name(&self) -> &'static str {
        "layer_norm"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let x = &inputs[0];
        let weight = if self.has_weight { inputs.get(1) } else { None };
        let bias = if self.has_bias { inputs.get(1 + self.has_weight as usize) } else { None };
        let dy = grad.contiguous()?;
        let dx = x
            .requires_grad()
            .then(|| {
                let backend = x.device().backend();
                let w = weight.map(|w| w.storage());
                let storage = backend.layer_norm_backward(
                    x.storage(),
                    w,
                    self.mean.storage(),
                    self.rstd.storage(),
                    dy.storage(),
                    &self.args,
                )?;
                Ok::<_, Error>(RawTensor::from_kernel(storage, x.shape(), x.device()))
            })
            .transpose()?;
        // Both parameter gradients in one pass over x and dy, where either is wanted.
        let (w, b) = (weight.filter(|w| w.requires_grad()), bias.filter(|b| b.requires_grad()));
        let (dw, db) = match (w, b) {
            (None, None) => (None, None),
            (w, b) => {
                let backend = x.device().backend();
                let (dw, db) = backend.layer_norm_param_grads(
                    x.storage(),
                    self.mean.storage(),
                    self.rstd.storage(),
                    dy.storage(),
                    &self.args,
                )?;
                let param = |s, p: Option<&RawTensor>| p.map(|p| RawTensor::from_kernel(s, p.shape(), x.device()));
                (param(dw, w), param(db, b))
            }
        };
        let mut grads = vec![dx];
        if self.has_weight {
            grads.push(dw);
        }
        if self.has_bias {
            grads.push(db);
        }
        Ok(grads)
    }
}

/// The fused batch norm's backward: `(dx, dweight, dbias)` from one kernel (of the ReLU'd
/// output with `args.relu`, the mask recomputed from `x`, the weight and the bias).
struct BatchNormBackward {
    mean: RawTensor,
    var: RawTensor,
    args: BatchNormArgs,
    has_weight: bool,
    has_bias: bool,
}

impl BackwardOp for BatchNormBackward {
    fn name(&self) -> &'static str {
        if self.args.relu {
            "batch_norm_relu"
        } else {
            "batch_norm"
        }
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let x = &inputs[0];
        let weight = if self.has_weight { inputs.get(1) } else { None };
        let bias = if self.has_bias { inputs.get(1 + self.has_weight as usize) } else { None };
        let dy = grad.contiguous()?;
        let device = x.device();
        let (dx, dw, db) = device.backend().batch_norm_backward(
            x.storage(),
            weight.map(|w| w.storage()),
            bias.map(|b| b.storage()),
            self.mean.storage(),
            self.var.storage(),
            dy.storage(),
            &self.args,
        )?;
        let channels = [self.args.channels];
        let mut grads = vec![x.requires_grad().then(|| RawTensor::from_kernel(dx, x.shape(), device))];
        if self.has_weight {
            grads.push(Some(RawTensor::from_kernel(dw, &channels, device)));
        }
        if self.has_bias {
            grads.push(Some(RawTensor::from_kernel(db, &channels, device)));
        }
        Ok(grads)
    }
}

/// The fused RMS norm's backward: `dx` from the kernel, `dweight = Σ_rows dy·x·rstd` from ops.
struct RmsNormBackward {
    rstd: RawTensor,
    args: LayerNormArgs,
    has_weight: bool,
}

impl BackwardOp for RmsNormBackward {
    fn name(&self) -> &'static str {
        "rms_norm"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let x = &inputs[0];
        let weight = if self.has_weight { inputs.get(1) } else { None };
        let dy = grad.contiguous()?;
        let (rows, cols) = (self.args.rows, self.args.cols);
        let dx = x
            .requires_grad()
            .then(|| {
                let storage = x.device().backend().rms_norm_backward(
                    x.storage(),
                    weight.map(|w| w.storage()),
                    self.rstd.storage(),
                    dy.storage(),
                    &self.args,
                )?;
                Ok::<_, Error>(RawTensor::from_kernel(storage, x.shape(), x.device()))
            })
            .transpose()?;
        let dw = weight
            .filter(|w| w.requires_grad())
            .map(|w| {
                let xhat = x.reshape(&[rows, cols])?.mul(&self.rstd.reshape(&[rows, 1])?)?;
                dy.reshape(&[rows, cols])?.mul(&xhat)?.sum(&[0], false)?.reshape(w.shape())
            })
            .transpose()?;
        let mut grads = vec![dx];
        if self.has_weight {
            grads.push(dw);
        }
        Ok(grads)
    }
}

/// Running statistics of a batch-norm layer, updated in place while training.
#[derive(Clone, Copy, Debug)]
pub struct RunningStats<'a> {
    /// `[channels]`, updated as `(1 - momentum)·mean + momentum·batch_mean`.
    pub mean: &'a RawTensor,
    /// `[channels]`, updated with the unbiased batch variance.
    pub var: &'a RawTensor,
    /// Weight of the new batch statistics (PyTorch's convention; 0.1 by default there).
    pub momentum: f32,
}

/// Checks that an optional per-feature tensor has `shape` and matches `x`'s device and dtype.
fn check_feature_tensor(
    op: &'static str,
    what: &str,
    x: &RawTensor,
    t: Option<&RawTensor>,
    shape: &[usize],
) -> Result<()> {
    let Some(t) = t else { return Ok(()) };
    t.check_f32(op)?;
    x.check_same_device(op, t)?;
    if t.shape() != shape {
        return Err(Error::shape(op, format!("input {:?}: {what} {:?} must be {shape:?}", x.shape(), t.shape())));
    }
    Ok(())
}

/// Checks a layer norm's input, normalised shape (trailing axes of `x`, none empty), weight,
/// bias and `eps`.
fn check_layer_norm(
    x: &RawTensor,
    normalized_shape: &[usize],
    weight: Option<&RawTensor>,
    bias: Option<&RawTensor>,
    eps: f32,
) -> Result<()> {
    check_trailing_norm("layer_norm", x, normalized_shape, weight, bias, eps)
}

/// Checks the input of a norm over trailing axes (layer or RMS norm, named `OP`): the
/// normalised shape (trailing axes of `x`, none empty), weight, bias and `eps`.
fn check_trailing_norm(
    op: &'static str,
    x: &RawTensor,
    normalized_shape: &[usize],
    weight: Option<&RawTensor>,
    bias: Option<&RawTensor>,
    eps: f32,
) -> Result<()> {
    x.check_f32(op)?;
    let k = normalized_shape.len();
    if k == 0 || k > x.rank() || &x.shape()[x.rank() - k..] != normalized_shape {
        return Err(Error::shape(
            op,
            format!("input {:?}: trailing axes must be the normalized shape {normalized_shape:?}", x.shape()),
        ));
    }
    if normalized_shape.contains(&0) {
        return Err(Error::shape(op, format!("normalized shape {normalized_shape:?} is empty")));
    }
    check_feature_tensor(op, "weight", x, weight, normalized_shape)?;
    check_feature_tensor(op, "bias", x, bias, normalized_shape)?;
    if eps.is_nan() || eps < 0.0 {
        return Err(Error::invalid(op, format!("eps {eps} must be non-negative")));
    }
    Ok(())
}

/// Overwrites `dst`'s elements with `src`'s on the device (running statistics).
fn write_in_place(dst: &RawTensor, src: &RawTensor) -> Result<()> {
    let src = src.reshape(dst.shape())?;
    dst.device().backend().copy_strided(src.storage(), src.layout(), dst.storage(), dst.layout())
}

/// Checks a batch norm's input (`[n, c, ...]`, more than one value per channel when
/// training), weight, bias, running statistics and `eps`; errors name `op`.
fn check_batch_norm(
    op: &'static str,
    x: &RawTensor,
    weight: Option<&RawTensor>,
    bias: Option<&RawTensor>,
    running: Option<&RunningStats<'_>>,
    training: bool,
    eps: f32,
) -> Result<()> {
    x.check_f32(op)?;
    if x.rank() < 2 {
        return Err(Error::shape(op, format!("input {:?}: expected [batch, channels, ...]", x.shape())));
    }
    let channels = x.shape()[1];
    check_feature_tensor(op, "weight", x, weight, &[channels])?;
    check_feature_tensor(op, "bias", x, bias, &[channels])?;
    if let Some(stats) = running {
        check_feature_tensor(op, "running_mean", x, Some(stats.mean), &[channels])?;
        check_feature_tensor(op, "running_var", x, Some(stats.var), &[channels])?;
        if !(0.0..=1.0).contains(&stats.momentum) {
            return Err(Error::invalid(op, format!("momentum {} must be in [0, 1]", stats.momentum)));
        }
    }
    if eps.is_nan() || eps < 0.0 {
        return Err(Error::invalid(op, format!("eps {eps} must be non-negative")));
    }
    let count = x.numel() / channels.max(1);
    if count <= 1 && training {
        return Err(Error::shape(
            op,
            format!("input {:?}: expected more than 1 value per channel when training", x.shape()),
        ));
    }
    Ok(())
}

/// Running statistics updated in place from a batch's `mean` and biased `var` (`[c]`) over
/// `count` values per channel: `(1 - m)·running + m·batch`, the variance made unbiased.
fn update_running(stats: RunningStats<'_>, mean: &RawTensor, var: &RawTensor, count: usize) -> Result<()> {
    no_grad(|| -> Result<()> {
        let m = stats.momentum;
        let unbiased = count as f32 / (count.max(2) - 1) as f32;
        let new_mean = stats.mean.mul_scalar(1.0 - m)?.add(&mean.mul_scalar(m)?)?;
        let new_var = stats.var.mul_scalar(1.0 - m)?.add(&var.mul_scalar(m * unbiased)?)?;
        write_in_place(stats.mean, &new_mean)?;
        write_in_place(stats.var, &new_var)
    })
}

/// [`update_running`] in one kernel where the running statistics are plain `[c]` storages of
/// their own (contiguous from offset 0, not the same tensor), else composed.
fn update_running_fused(
    stats: RunningStats<'_>,
    mean: &RawTensor,
    var: &RawTensor,
    args: &BatchNormArgs,
) -> Result<()> {
    let plain = |t: &RawTensor| t.is_contiguous() && t.layout().offset() == 0;
    if !plain(stats.mean) || !plain(stats.var) || stats.mean.storage().same_memory(stats.var.storage()) {
        return update_running(stats, mean, var, args.count());
    }
    let backend = mean.device().backend();
    backend.batch_norm_update_running(
        stats.mean.storage(),
        stats.var.storage(),
        mean.storage(),
        var.storage(),
        stats.momentum,
        args,
    )
}

/// `x·weight + bias` with optional terms.
fn affine(x: RawTensor, weight: Option<&RawTensor>, bias: Option<&RawTensor>) -> Result<RawTensor> {
    let x = match weight {
        Some(w) => x.mul(w)?,
        None => x,
    };
    match bias {
        Some(b) => x.add(b),
        None => Ok(x),
    }
}

impl RawTensor {
    /// Batch normalisation of `[n, c]` or `[n, c, ...]` over every axis but the channel axis 1.
    ///
    /// With `training` (or without running statistics) it normalises with the batch mean and the
    /// biased batch variance; with `training` and `running` it also updates the running mean and
    /// the running variance (unbiased) in place, like PyTorch. Otherwise it uses the running
    /// statistics. `weight` and `bias` are `[c]`. On a device with fused kernels (the CPU and
    /// wgpu) the forward and the backward are one kernel each (a few dispatches on wgpu), and the
    /// running statistics' update one more; elsewhere it is
    /// [`RawTensor::batch_norm_reference`].
    pub fn batch_norm(
        &self,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        running: Option<RunningStats<'_>>,
        training: bool,
        eps: f32,
    ) -> Result<RawTensor> {
        self.batch_norm_fused(false, weight, bias, running, training, eps)
    }

    /// `relu(batch_norm(..))`, PyTorch's `F.relu(F.batch_norm(..))`, with the ReLU inside the
    /// batch norm's own passes: the forward's elementwise pass writes `max(0, y)`, and the
    /// backward masks the incoming gradient where the output was not positive, recomputing it
    /// from the input it reads anyway (no saved output, no ReLU pass either way). Arguments,
    /// statistics and the running statistics' update are those of [`RawTensor::batch_norm`];
    /// errors name `batch_norm_relu`. On a device without fused batch norm kernels it is
    /// [`RawTensor::batch_norm_reference`] then [`RawTensor::relu`].
    pub fn batch_norm_relu(
        &self,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        running: Option<RunningStats<'_>>,
        training: bool,
        eps: f32,
    ) -> Result<RawTensor> {
        self.batch_norm_fused(true, weight, bias, running, training, eps)
    }

    /// [`RawTensor::batch_norm`], or with `relu` [`RawTensor::batch_norm_relu`], through the
    /// device's fused kernels where it has them.
    fn batch_norm_fused(
        &self,
        relu: bool,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        running: Option<RunningStats<'_>>,
        training: bool,
        eps: f32,
    ) -> Result<RawTensor> {
        let op = if relu { "batch_norm_relu" } else { "batch_norm" };
        check_batch_norm(op, self, weight, bias, running.as_ref(), training, eps)?;
        if !self.device().backend().fuses_batch_norm() || self.numel() == 0 {
            let y = self.batch_norm_reference(weight, bias, running, training, eps)?;
            return if relu { y.relu() } else { Ok(y) };
        }
        let channels = self.shape()[1];
        let batch = self.shape()[0];
        let inner = crate::layout::checked_numel(op, &self.shape()[2..])?;
        let batch_stats = training || running.is_none();
        let args = BatchNormArgs { batch, channels, inner, eps, batch_stats, relu };
        args.check(op)?;
        let x = self.contiguous()?;
        let weight = weight.map(|w| w.contiguous()).transpose()?;
        let bias = bias.map(|b| b.contiguous()).transpose()?;
        let given = match (&running, batch_stats) {
            (Some(stats), false) => Some((stats.mean.contiguous()?, stats.var.contiguous()?)),
            _ => None,
        };
        let device = x.device();
        let (y, mean, var) = device.backend().batch_norm(
            x.storage(),
            weight.as_ref().map(|w| w.storage()),
            bias.as_ref().map(|b| b.storage()),
            given.as_ref().map(|(m, v)| (m.storage(), v.storage())),
            &args,
        )?;
        let mean = RawTensor::from_kernel(mean, &[channels], device);
        let var = RawTensor::from_kernel(var, &[channels], device);
        if let (Some(stats), true) = (running, training) {
            update_running_fused(stats, &mean, &var, &args)?;
        }
        let (has_weight, has_bias) = (weight.is_some(), bias.is_some());
        let inputs: Vec<&RawTensor> = [Some(&x), weight.as_ref(), bias.as_ref()].into_iter().flatten().collect();
        Ok(RawTensor::from_op_contiguous(y, x.shape(), device, &inputs, || {
            Box::new(BatchNormBackward { mean, var, args, has_weight, has_bias })
        }))
    }

    /// [`RawTensor::batch_norm`] composed from elementwise ops and reductions (its backward
    /// from autograd): the path of devices without fused kernels and the reference the fused
    /// ones are tested against.
    pub fn batch_norm_reference(
        &self,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        running: Option<RunningStats<'_>>,
        training: bool,
        eps: f32,
    ) -> Result<RawTensor> {
        check_batch_norm("batch_norm", self, weight, bias, running.as_ref(), training, eps)?;
        let channels = self.shape()[1];
        // Per-channel tensors broadcast as [1, c, 1, ...].
        let mut stat_shape = vec![1; self.rank()];
        stat_shape[1] = channels;
        let per_channel = |t: Option<&RawTensor>| t.map(|t| t.reshape(&stat_shape)).transpose();
        let (weight, bias) = (per_channel(weight)?, per_channel(bias)?);

        let normalized = match running {
            Some(stats) if !training => {
                let mean = stats.mean.reshape(&stat_shape)?;
                let std = stats.var.reshape(&stat_shape)?.add_scalar(eps)?.sqrt()?;
                self.sub(&mean)?.div(&std)?
            }
            _ => {
                let count = self.numel() / channels.max(1);
                let axes: Vec<isize> = (0..self.rank() as isize).filter(|&a| a != 1).collect();
                let mean = self.mean(&axes, true)?;
                let centered = self.sub(&mean)?;
                let var = centered.mul(&centered)?.mean(&axes, true)?;
                if let (Some(stats), true) = (running, training) {
                    update_running(stats, &mean.reshape(&[channels])?, &var.reshape(&[channels])?, count)?;
                }
                centered.div(&var.add_scalar(eps)?.sqrt()?)?
            }
        };
        affine(normalized, weight.as_ref(), bias.as_ref())
    }

    /// Layer normalisation over the trailing `normalized_shape` axes (biased variance), with
    /// optional elementwise `weight` and `bias` of `normalized_shape`, through the device's
    /// fused kernels.
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        eps: f32,
    ) -> Result<RawTensor> {
        const OP: &str = "layer_norm";
        check_layer_norm(self, normalized_shape, weight, bias, eps)?;
        let cols = crate::layout::checked_numel(OP, normalized_shape)?;
        let args = LayerNormArgs { rows: self.numel() / cols, cols, eps };
        args.check(OP)?;
        let x = self.contiguous()?;
        let weight = weight.map(|w| w.contiguous()).transpose()?;
        let bias = bias.map(|b| b.contiguous()).transpose()?;
        let device = x.device();
        let (y, mean, rstd) = device.backend().layer_norm(
            x.storage(),
            weight.as_ref().map(|w| w.storage()),
            bias.as_ref().map(|b| b.storage()),
            &args,
        )?;
        let mean = RawTensor::from_kernel(mean, &[args.rows], device);
        let rstd = RawTensor::from_kernel(rstd, &[args.rows], device);
        let (has_weight, has_bias) = (weight.is_some(), bias.is_some());
        let inputs: Vec<&RawTensor> = [Some(&x), weight.as_ref(), bias.as_ref()].into_iter().flatten().collect();
        Ok(RawTensor::from_op_contiguous(y, x.shape(), device, &inputs, || {
            Box::new(LayerNormBackward { mean, rstd, args, has_weight, has_bias })
        }))
    }

    /// [`RawTensor::layer_norm`] composed from elementwise ops and reductions (its backward
    /// from autograd): the reference the fused kernels are tested against.
    pub fn layer_norm_reference(
        &self,
        normalized_shape: &[usize],
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        eps: f32,
    ) -> Result<RawTensor> {
        check_layer_norm(self, normalized_shape, weight, bias, eps)?;
        let axes: Vec<isize> = (-(normalized_shape.len() as isize)..0).collect();
        let mean = self.mean(&axes, true)?;
        let centered = self.sub(&mean)?;
        let var = centered.mul(&centered)?.mean(&axes, true)?;
        let normalized = centered.div(&var.add_scalar(eps)?.sqrt()?)?;
        affine(normalized, weight, bias)
    }
    /// RMS normalisation over the trailing `normalized_shape` axes (PyTorch's `rms_norm`):
    /// `x / √(mean(x²) + eps) · weight`, with an optional elementwise `weight` of
    /// `normalized_shape`, through the device's fused kernels.
    pub fn rms_norm(&self, normalized_shape: &[usize], weight: Option<&RawTensor>, eps: f32) -> Result<RawTensor> {
        const OP: &str = "rms_norm";
        check_trailing_norm(OP, self, normalized_shape, weight, None, eps)?;
        let cols = crate::layout::checked_numel(OP, normalized_shape)?;
        let args = LayerNormArgs { rows: self.numel() / cols, cols, eps };
        args.check(OP)?;
        let x = self.contiguous()?;
        let weight = weight.map(|w| w.contiguous()).transpose()?;
        let device = x.device();
        let (y, rstd) = device.backend().rms_norm(x.storage(), weight.as_ref().map(|w| w.storage()), &args)?;
        let rstd = RawTensor::from_kernel(rstd, &[args.rows], device);
        let has_weight = weight.is_some();
        let inputs: Vec<&RawTensor> = [Some(&x), weight.as_ref()].into_iter().flatten().collect();
        Ok(RawTensor::from_op_contiguous(y, x.shape(), device, &inputs, || {
            Box::new(RmsNormBackward { rstd, args, has_weight })
        }))
    }

    /// Group normalisation of `[n, c, ...]` (PyTorch's `group_norm`): the channels are split
    /// into `groups` groups of `c / groups` consecutive channels, each sample's group is
    /// normalised over its channels and every trailing axis (biased variance, `eps` added),
    /// then `weight` and `bias` (`[c]`, each optional) scale and shift each channel. With
    /// `groups = c` it is instance normalisation. The normalisation is the fused layer norm of
    /// each group's slab, the affine map elementwise ops.
    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        eps: f32,
    ) -> Result<RawTensor> {
        const OP: &str = "group_norm";
        self.check_f32(OP)?;
        if self.rank() < 2 {
            return Err(Error::shape(OP, format!("input {:?}: expected [batch, channels, ...]", self.shape())));
        }
        let channels = self.shape()[1];
        if groups == 0 || !channels.is_multiple_of(groups) {
            return Err(Error::invalid(
                OP,
                format!("input {:?}: {groups} groups must divide the {channels} channels", self.shape()),
            ));
        }
        check_feature_tensor(OP, "weight", self, weight, &[channels])?;
        check_feature_tensor(OP, "bias", self, bias, &[channels])?;
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(OP, format!("eps {eps} must be non-negative")));
        }
        let slab = crate::layout::checked_numel(OP, &self.shape()[1..])? / groups;
        if slab == 0 {
            return Err(Error::shape(OP, format!("input {:?}: each group is empty", self.shape())));
        }
        let rows = self.shape()[0] * groups;
        let normalized = self.reshape(&[rows, slab])?.layer_norm(&[slab], None, None, eps)?.reshape(self.shape())?;
        // Per-channel tensors broadcast as [c, 1, ...] against [n, c, ...].
        let mut channel_shape = vec![1; self.rank() - 1];
        channel_shape[0] = channels;
        let per_channel = |t: Option<&RawTensor>| t.map(|t| t.reshape(&channel_shape)).transpose();
        let (weight, bias) = (per_channel(weight)?, per_channel(bias)?);
        affine(normalized, weight.as_ref(), bias.as_ref())
    }
}
