//! Elementwise functions of one tensor and their derivatives.

use crate::autograd::BackwardOp;
use crate::backend::UnaryOp;
use crate::tensor::RawTensor;
use crate::Result;

/// Saves the output so derivatives that need it (exp, sigmoid, tanh, sqrt) don't recompute.
struct UnaryBackward {
    op: UnaryOp,
    output: RawTensor,
}

impl BackwardOp for UnaryBackward {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let x = inputs[0].contiguous()?;
        let grad = grad.contiguous()?;
        let backend = x.device().backend();
        let storage = backend.unary_backward(self.op, x.storage(), self.output.storage(), grad.storage(), x.numel())?;
        Ok(vec![Some(RawTensor::from_kernel(storage, x.shape(), x.device()))])
    }
}

impl RawTensor {
    /// Applies `op` elementwise.
    pub fn unary(&self, op: UnaryOp) -> Result<RawTensor> {
        self.check_f32(op.name())?;
        let x = self.contiguous()?;
        let storage = x.device().backend().unary(op, x.storage(), x.numel())?;
        let output = RawTensor::from_kernel(storage.clone(), x.shape(), x.device());
        Ok(RawTensor::from_op_contiguous(storage, x.shape(), x.device(), &[&x], || {
            Box::new(UnaryBackward { op, output })
        }))
    }

    /// Elementwise `-x`.
    pub fn neg(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Neg)
    }
    /// Elementwise `e^x`.
    pub fn exp(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Exp)
    }
    /// Elementwise natural logarithm (`-inf` at 0, NaN below).
    pub fn log(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Log)
    }
    /// Elementwise square root (NaN below 0).
    pub fn sqrt(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Sqrt)
    }
    /// Elementwise `|x|`.
    pub fn abs(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Abs)
    }
    /// Elementwise `max(x, 0)` (gradient 0 at 0).
    pub fn relu(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Relu)
    }
    /// `x` where positive, `negative_slope · x` elsewhere.
    pub fn leaky_relu(&self, negative_slope: f32) -> Result<RawTensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope))
    }
    /// Elementwise `1 / (1 + e^-x)`.
    pub fn sigmoid(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Sigmoid)
    }
    /// Elementwise hyperbolic tangent.
    pub fn tanh(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Tanh)
    }
    /// GELU with the exact erf form (PyTorch's default).
    pub fn gelu(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Gelu)
    }
    /// GELU with the tanh approximation (`approximate="tanh"`).
    pub fn gelu_tanh(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::GeluTanh)
    }
    /// Elementwise `x · sigmoid(x)` (SiLU, also called swish).
    pub fn silu(&self) -> Result<RawTensor> {
        self.unary(UnaryOp::Silu)
    }
    /// Elementwise `x + s`.
    pub fn add_scalar(&self, s: f32) -> Result<RawTensor> {
        self.unary(UnaryOp::AddScalar(s))
    }
    /// Elementwise `x · s`.
    pub fn mul_scalar(&self, s: f32) -> Result<RawTensor> {
        self.unary(UnaryOp::MulScalar(s))
    }
    /// `x ^ p` for a scalar exponent.
    pub fn powf(&self, p: f32) -> Result<RawTensor> {
        self.unary(UnaryOp::Powf(p))
    }
    /// Elementwise `min(max(x, min), max)`; the gradient passes where `x` is inside the bounds.
    /// `min > max` or a NaN bound is [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn clamp(&self, min: f32, max: f32) -> Result<RawTensor> {
        if min > max || min.is_nan() || max.is_nan() {
            return Err(crate::Error::invalid("clamp", format!("min {min} must not exceed max {max}")));
        }
        self.unary(UnaryOp::Clamp(min, max))
    }
    /// `x * scale + shift`.
    pub fn affine(&self, scale: f32, shift: f32) -> Result<RawTensor> {
        let scaled = if scale == 1.0 { self.clone() } else { self.mul_scalar(scale)? };
        if shift == 0.0 {
            Ok(scaled)
        } else {
            scaled.add_scalar(shift)
        }
    }
}
