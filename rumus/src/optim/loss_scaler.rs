//! Dynamic loss scaling for mixed-precision training (`torch.amp.GradScaler`).

use super::clip::check_max_norm;
use super::{clip_grad_norm, Optimizer};
use crate::nn::Param;
use crate::{Error, Gradients, RawTensor, Result};

/// Dynamic loss scaling, with the semantics and defaults of PyTorch's `torch.amp.GradScaler`.
///
/// With f16 tensor cores ([`MatmulPrecision::F16TensorCores`](crate::MatmulPrecision::F16TensorCores)), matmul
/// and convolution operands are rounded to f16 (smallest normal 6.1e-5, largest 65504), so the
/// small gradients of a backward pass lose precision or flush to zero. The scaler multiplies
/// the loss by a large factor before backward ([`scale_loss`](Self::scale_loss)), which scales
/// every gradient by it, and divides the gradients by it again before the optimizer sees them
/// ([`step`](Self::step)). When a scaled gradient overflowed (some gradient is NaN or
/// infinite), the step is skipped and the scale halved; after
/// [`growth_interval`](Self::growth_interval) steps in a row without overflow it doubles, so
/// it stays near the largest scale the gradients bear.
///
/// A hand-written training loop:
///
/// ```
/// use rumus::nn::{named_parameters, Linear, Module};
/// use rumus::optim::{LossScaler, Sgd};
/// use rumus::{Device, RawTensor};
///
/// let device = Device::cpu();
/// let layer = Linear::new(&device, 2, 1, false, 0)?;
/// let params = named_parameters(&layer);
/// let mut opt = Sgd::new(0.1);
/// let mut scaler = LossScaler::new();
/// let x = RawTensor::from_vec(vec![1.0, 2.0], &[1, 2], &device)?;
/// for _ in 0..3 {
///     let loss = layer.forward_raw(&x)?.sum(&[0, 1], false)?;
///     let loss = scaler.scale_loss(&loss)?; // loss · 65536
///     let mut grads = loss.backward()?; // gradients · 65536
///     let stepped = scaler.step(&mut opt, &params, &mut grads, None)?; // unscaled, then SGD
///     assert!(stepped, "finite gradients: the optimizer stepped");
/// }
/// assert_eq!(scaler.scale(), 65536.0);
/// assert_eq!(scaler.skipped_steps(), 0);
/// # Ok::<(), rumus::Error>(())
/// ```
///
/// [`Fit::loss_scaler`](crate::train::Fit::loss_scaler) does the same inside `fit`.
#[derive(Clone, Debug)]
pub struct LossScaler {
    scale: f32,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: usize,
    /// Steps with finite gradients since the scale last changed.
    good_steps: usize,
    /// Steps skipped for non-finite gradients so far.
    skipped: usize,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler::new()
    }
}

impl LossScaler {
    /// PyTorch's defaults: initial scale 65536 (2^16), growth factor 2, backoff factor 0.5,
    /// growth interval 2000 steps.
    pub fn new() -> Self {
        LossScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            good_steps: 0,
            skipped: 0,
        }
    }

    /// The scale to start from (default 65536); finite and > 0, else
    /// [`Error::InvalidArgument`]. Powers of two keep scaling and unscaling exact.
    pub fn with_initial_scale(mut self, scale: f32) -> Result<Self> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(Error::invalid(
                "LossScaler::with_initial_scale",
                format!("initial scale {scale} must be finite and > 0"),
            ));
        }
        self.scale = scale;
        Ok(self)
    }

    /// What the scale is multiplied by after [`growth_interval`](Self::growth_interval) steps
    /// in a row with finite gradients (default 2); finite and > 1, else
    /// [`Error::InvalidArgument`].
    pub fn growth_factor(mut self, factor: f32) -> Result<Self> {
        if !(factor.is_finite() && factor > 1.0) {
            return Err(Error::invalid(
                "LossScaler::growth_factor",
                format!("growth_factor {factor} must be finite and > 1"),
            ));
        }
        self.growth_factor = factor;
        Ok(self)
    }

    /// What the scale is multiplied by after a step with non-finite gradients (default 0.5);
    /// in (0, 1), else [`Error::InvalidArgument`].
    pub fn backoff_factor(mut self, factor: f32) -> Result<Self> {
        if !(factor > 0.0 && factor < 1.0) {
            return Err(Error::invalid(
                "LossScaler::backoff_factor",
                format!("backoff_factor {factor} must be in (0, 1)"),
            ));
        }
        self.backoff_factor = factor;
        Ok(self)
    }

    /// How many steps in a row with finite gradients grow the scale (default 2000); at least
    /// 1, else [`Error::InvalidArgument`].
    pub fn growth_interval(mut self, steps: usize) -> Result<Self> {
        if steps == 0 {
            return Err(Error::invalid("LossScaler::growth_interval", "growth_interval 0 must be at least 1"));
        }
        self.growth_interval = steps;
        Ok(self)
    }

    /// The current scale: finite and > 0.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// How many [`step`](Self::step)s were skipped for NaN or infinite gradients so far.
    pub fn skipped_steps(&self) -> usize {
        self.skipped
    }

    /// `loss · scale`, a differentiable tensor op: backward from it gives every gradient
    /// multiplied by the scale. `loss` is usually a scalar, but any tensor is scaled.
    pub fn scale_loss(&self, loss: &RawTensor) -> Result<RawTensor> {
        loss.mul_scalar(self.scale)
    }

    /// Unscales the gradients of a backward pass from [`scale_loss`](Self::scale_loss) and
    /// steps `optimizer` with them unless one is NaN or infinite. Returns whether the
    /// optimizer stepped.
    ///
    /// Every trainable parameter of `params` with a gradient in `grads` (each tensor once, as
    /// [`clip_grad_norm`] and the optimizers count them) has its gradient replaced by
    /// `gradient · (1 / scale)`, on the device. Whether they are all finite is found in the
    /// same pass: one kernel per gradient (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`)
    /// multiplies it and raises a flag, one per device, wherever a value is NaN or infinite
    /// (before or after the multiplication); each flag is read with one host transfer. Then:
    /// - all finite: `clip` (if given, a max norm for [`clip_grad_norm`] of the unscaled
    ///   gradients) and [`Optimizer::step`]; after `growth_interval` such steps in a row the
    ///   scale is multiplied by the growth factor (held at `f32::MAX`). Returns `true`.
    /// - any non-finite: no optimizer step, the scale is multiplied by the backoff factor, the
    ///   run of good steps starts again, and [`skipped_steps`](Self::skipped_steps) counts
    ///   one. Returns `false`. Should the scale fall below `f32::MIN_POSITIVE`, the gradients
    ///   are non-finite at every scale (NaN inputs or weights): that is
    ///   [`Error::NonFinite`], with the step skipped and the scale left as it was.
    ///
    /// No trainable parameter with a gradient is a step with nothing to do, as for
    /// [`Optimizer::step`]: the optimizer is called (it changes nothing), the scale and the
    /// count of good steps are left alone, and the result is `true`.
    ///
    /// A `clip` that is not positive and finite is [`Error::InvalidArgument`], checked first.
    pub fn step(
        &mut self,
        optimizer: &mut dyn Optimizer,
        params: &[(String, Param)],
        grads: &mut Gradients,
        clip: Option<f32>,
    ) -> Result<bool> {
        clip.map(check_max_norm).transpose()?;
        if !self.unscale(params, grads)? {
            self.back_off()?;
            return Ok(false);
        }
        let any = crate::nn::unique_trainable(params).iter().any(|(_, p)| grads.get(p.tensor()).is_some());
        if let (Some(max_norm), true) = (clip, any) {
            clip_grad_norm(params, grads, max_norm)?;
        }
        optimizer.step(params, grads)?;
        if any {
            self.grow();
        }
        Ok(true)
    }

    /// Multiplies every trainable gradient in `grads` by `1 / scale`, in place; returns whether
    /// they are all finite (true when there is none). One fused kernel per gradient, which
    /// raises its device's flag on a NaN or infinite value; then one read per device's flag.
    fn unscale(&self, params: &[(String, Param)], grads: &mut Gradients) -> Result<bool> {
        let _no_grad = crate::autograd::NoGradGuard::new();
        let inverse = 1.0 / self.scale;
        if !inverse.is_finite() {
            // A subnormal scale below 2^-128 (reachable only through `with_initial_scale`) has no
            // finite inverse: the gradients are left as they are and the step counts as an
            // overflow, whose backoff falls below `f32::MIN_POSITIVE`: `Error::NonFinite`.
            return Ok(false);
        }
        // One flag per device, raised by the kernel of any gradient there with a non-finite value.
        let mut flags = crate::ops::NonFiniteFlags::default();
        for (_, param) in crate::nn::unique_trainable(params) {
            let grad = match grads.get(param.tensor()) {
                Some(g) if g.numel() > 0 => g.clone(),
                _ => continue,
            };
            let unscaled = crate::ops::unscale_grad(&grad, inverse, &flags.on(grad.device())?)?;
            grads.insert(param.tensor().id(), unscaled);
        }
        Ok(!flags.any_raised()?)
    }

    /// After a step with finite gradients.
    fn grow(&mut self) {
        self.good_steps += 1;
        if self.good_steps >= self.growth_interval {
            self.good_steps = 0;
            // An infinite product is held at the largest finite scale.
            self.scale = (self.scale * self.growth_factor).min(f32::MAX);
        }
    }

    /// After a step skipped for non-finite gradients.
    fn back_off(&mut self) -> Result<()> {
        self.good_steps = 0;
        self.skipped = self.skipped.saturating_add(1);
        let next = self.scale * self.backoff_factor;
        if next < f32::MIN_POSITIVE {
            return Err(Error::NonFinite(format!(
                "LossScaler::step: the gradients are NaN or infinite at every scale (now {}, {} steps skipped): \
                 NaN or infinite inputs, targets or weights",
                self.scale, self.skipped
            )));
        }
        self.scale = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::LossScaler;
    use crate::Error;

    #[test]
    fn loss_scaler_defaults_are_pytorchs() {
        let s = LossScaler::default();
        assert_eq!(
            (s.scale(), s.growth_factor, s.backoff_factor, s.growth_interval, s.skipped_steps()),
            (65536.0, 2.0, 0.5, 2000, 0)
        );
    }

    #[test]
    fn loss_scaler_invalid_settings_are_errors_naming_the_setter() {
        let bad: Vec<(&str, crate::Result<LossScaler>)> = vec![
            ("with_initial_scale", LossScaler::new().with_initial_scale(0.0)),
            ("with_initial_scale", LossScaler::new().with_initial_scale(-1.0)),
            ("with_initial_scale", LossScaler::new().with_initial_scale(f32::INFINITY)),
            ("with_initial_scale", LossScaler::new().with_initial_scale(f32::NAN)),
            ("growth_factor", LossScaler::new().growth_factor(1.0)),
            ("growth_factor", LossScaler::new().growth_factor(f32::INFINITY)),
            ("growth_factor", LossScaler::new().growth_factor(f32::NAN)),
            ("backoff_factor", LossScaler::new().backoff_factor(0.0)),
            ("backoff_factor", LossScaler::new().backoff_factor(1.0)),
            ("backoff_factor", LossScaler::new().backoff_factor(f32::NAN)),
            ("growth_interval", LossScaler::new().growth_interval(0)),
        ];
        for (setter, result) in bad {
            match result {
                Err(Error::InvalidArgument { op, .. }) => assert_eq!(op, format!("LossScaler::{setter}")),
                other => panic!("{setter}: expected InvalidArgument, got {other:?}"),
            }
        }
        let ok = LossScaler::new().with_initial_scale(4.0).and_then(|s| s.growth_factor(3.0));
        let ok = ok.and_then(|s| s.backoff_factor(0.25)).and_then(|s| s.growth_interval(1)).unwrap();
        assert_eq!((ok.scale(), ok.growth_factor, ok.backoff_factor, ok.growth_interval), (4.0, 3.0, 0.25, 1));
    }

    #[test]
    fn loss_scaler_grows_after_the_interval_and_backs_off_on_overflow() {
        let mut s = LossScaler::new().growth_interval(2).unwrap();
        s.grow();
        assert_eq!(s.scale(), 65536.0);
        s.grow();
        assert_eq!(s.scale(), 131072.0);
        s.grow();
        s.back_off().unwrap();
        assert_eq!((s.scale(), s.skipped_steps(), s.good_steps), (65536.0, 1, 0));
        s.grow();
        assert_eq!(s.scale(), 65536.0, "the skip restarted the run of good steps");
    }

    #[test]
    fn loss_scaler_scale_stays_finite_and_positive_at_the_limits() {
        let mut s = LossScaler::new().with_initial_scale(f32::MAX).unwrap().growth_interval(1).unwrap();
        s.grow();
        assert_eq!(s.scale(), f32::MAX);
        let mut s = LossScaler::new().with_initial_scale(f32::MIN_POSITIVE).unwrap();
        match s.back_off() {
            Err(Error::NonFinite(msg)) => assert!(msg.contains("every scale"), "{msg}"),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        assert_eq!((s.scale(), s.skipped_steps()), (f32::MIN_POSITIVE, 1));
    }

    #[test]
    fn loss_scaler_a_subnormal_scale_has_no_finite_inverse_and_is_non_finite() {
        use crate::nn::Param;
        use crate::{Device, RawTensor};
        let w = Param::new(RawTensor::zeros(&[2], &Device::cpu()).unwrap()).unwrap();
        let params = [("w".to_string(), w.clone())];
        let mut s = LossScaler::new().with_initial_scale(1e-40).unwrap();
        let loss = s.scale_loss(&w.tensor().sum_all().unwrap()).unwrap();
        let mut grads = loss.backward().unwrap();
        match s.step(&mut crate::optim::Sgd::new(0.1), &params, &mut grads, None) {
            Err(Error::NonFinite(msg)) => assert!(msg.contains("every scale"), "{msg}"),
            other => panic!("expected NonFinite, got {other:?}"),
        }
        assert_eq!((s.scale(), s.skipped_steps()), (1e-40, 1));
        assert_eq!(w.tensor().to_vec().unwrap(), [0.0, 0.0], "no step");
    }
}
