//! Batch and layer normalisation, composed from elementwise ops and reductions so their
//! backward comes from autograd and runs on whichever device holds the tensors.

use crate::tensor::RawTensor;
use crate::{no_grad, Error, Result};

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

/// Overwrites `dst`'s elements with `src`'s on the device (running statistics).
fn write_in_place(dst: &RawTensor, src: &RawTensor) -> Result<()> {
    let src = src.reshape(dst.shape())?;
    dst.device().backend().copy_strided(src.storage(), src.layout(), dst.storage(), dst.layout())
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
    /// statistics. `weight` and `bias` are `[c]`.
    pub fn batch_norm(
        &self,
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        running: Option<RunningStats<'_>>,
        training: bool,
        eps: f32,
    ) -> Result<RawTensor> {
        const OP: &str = "batch_norm";
        self.check_f32(OP)?;
        if self.rank() < 2 {
            return Err(Error::shape(OP, format!("input {:?}: expected [batch, channels, ...]", self.shape())));
        }
        let channels = self.shape()[1];
        check_feature_tensor(OP, "weight", self, weight, &[channels])?;
        check_feature_tensor(OP, "bias", self, bias, &[channels])?;
        if let Some(stats) = &running {
            check_feature_tensor(OP, "running_mean", self, Some(stats.mean), &[channels])?;
            check_feature_tensor(OP, "running_var", self, Some(stats.var), &[channels])?;
            if !(0.0..=1.0).contains(&stats.momentum) {
                return Err(Error::invalid(OP, format!("momentum {} must be in [0, 1]", stats.momentum)));
            }
        }
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(OP, format!("eps {eps} must be non-negative")));
        }
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
                if count <= 1 && training {
                    return Err(Error::shape(
                        OP,
                        format!("input {:?}: expected more than 1 value per channel when training", self.shape()),
                    ));
                }
                let axes: Vec<isize> = (0..self.rank() as isize).filter(|&a| a != 1).collect();
                let mean = self.mean(&axes, true)?;
                let centered = self.sub(&mean)?;
                let var = centered.mul(&centered)?.mean(&axes, true)?;
                if let (Some(stats), true) = (running, training) {
                    no_grad(|| -> Result<()> {
                        let m = stats.momentum;
                        let unbiased = count as f32 / (count - 1) as f32;
                        let new_mean =
                            stats.mean.mul_scalar(1.0 - m)?.add(&mean.reshape(&[channels])?.mul_scalar(m)?)?;
                        let new_var =
                            stats.var.mul_scalar(1.0 - m)?.add(&var.reshape(&[channels])?.mul_scalar(m * unbiased)?)?;
                        write_in_place(stats.mean, &new_mean)?;
                        write_in_place(stats.var, &new_var)
                    })?;
                }
                centered.div(&var.add_scalar(eps)?.sqrt()?)?
            }
        };
        affine(normalized, weight.as_ref(), bias.as_ref())
    }

    /// Layer normalisation over the trailing `normalized_shape` axes (biased variance), with
    /// optional elementwise `weight` and `bias` of `normalized_shape`.
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&RawTensor>,
        bias: Option<&RawTensor>,
        eps: f32,
    ) -> Result<RawTensor> {
        const OP: &str = "layer_norm";
        self.check_f32(OP)?;
        let k = normalized_shape.len();
        if k == 0 || k > self.rank() || &self.shape()[self.rank() - k..] != normalized_shape {
            return Err(Error::shape(
                OP,
                format!("input {:?}: trailing axes must be the normalized shape {normalized_shape:?}", self.shape()),
            ));
        }
        if normalized_shape.contains(&0) {
            return Err(Error::shape(OP, format!("normalized shape {normalized_shape:?} is empty")));
        }
        check_feature_tensor(OP, "weight", self, weight, normalized_shape)?;
        check_feature_tensor(OP, "bias", self, bias, normalized_shape)?;
        if eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(OP, format!("eps {eps} must be non-negative")));
        }
        let axes: Vec<isize> = (-(k as isize)..0).collect();
        let mean = self.mean(&axes, true)?;
        let centered = self.sub(&mean)?;
        let var = centered.mul(&centered)?.mean(&axes, true)?;
        let normalized = centered.div(&var.add_scalar(eps)?.sqrt()?)?;
        affine(normalized, weight, bias)
    }
}
