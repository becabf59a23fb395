//! Elementwise functions of two tensors with NumPy broadcasting.

use crate::autograd::BackwardOp;
use crate::backend::BinaryOp;
use crate::layout::broadcast_shapes;
use crate::tensor::RawTensor;
use crate::{Layout, Result};

struct BinaryBackward {
    op: BinaryOp,
}

impl BackwardOp for BinaryBackward {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        // Only the gradients autograd keeps: an operand that does not require grad (data, a
        // constant, a target) costs no kernel.
        let (wa, wb) = (a.requires_grad(), b.requires_grad());
        let (ga, gb) = match self.op {
            BinaryOp::Add => (wa.then(|| grad.clone()), wb.then(|| grad.clone())),
            BinaryOp::Sub => (wa.then(|| grad.clone()), if wb { Some(grad.neg()?) } else { None }),
            BinaryOp::Mul => (wanted(wa, || grad.mul(b))?, wanted(wb, || grad.mul(a))?),
            BinaryOp::Div => (wanted(wa, || grad.div(b))?, wanted(wb, || grad.mul(a)?.div(&b.mul(b)?)?.neg())?),
            BinaryOp::Maximum | BinaryOp::Minimum => {
                // The larger (smaller) operand gets the gradient; ties split it evenly.
                let (first, second) = if self.op == BinaryOp::Maximum { (a, b) } else { (b, a) };
                let tie = first.binary(BinaryOp::Eq, second)?.mul_scalar(0.5)?;
                let a_wins = || grad.mul(&first.binary(BinaryOp::Gt, second)?.add(&tie)?);
                let b_wins = || grad.mul(&second.binary(BinaryOp::Gt, first)?.add(&tie)?);
                (wanted(wa, a_wins)?, wanted(wb, b_wins)?)
            }
            BinaryOp::Eq | BinaryOp::Gt => return Ok(vec![None, None]),
        };
        let to = |g: Option<RawTensor>, shape: &[usize]| g.map(|g| g.sum_to_shape(shape)).transpose();
        Ok(vec![to(ga, a.shape())?, to(gb, b.shape())?])
    }
}

/// `f()` when the gradient is wanted, else nothing (and no kernel).
fn wanted(want: bool, f: impl FnOnce() -> Result<RawTensor>) -> Result<Option<RawTensor>> {
    if want {
        f().map(Some)
    } else {
        Ok(None)
    }
}

impl RawTensor {
    /// `self op other` with broadcasting.
    pub fn binary(&self, op: BinaryOp, other: &RawTensor) -> Result<RawTensor> {
        self.check_f32(op.name())?;
        other.check_f32(op.name())?;
        self.check_same_device(op.name(), other)?;
        let shape = broadcast_shapes(op.name(), self.shape(), other.shape())?;
        let lhs_layout = self.layout().broadcast_to(&shape)?;
        let rhs_layout = other.layout().broadcast_to(&shape)?;
        let backend = self.device().backend();
        let storage = backend.binary(op, self.storage(), &lhs_layout, other.storage(), &rhs_layout)?;
        Ok(RawTensor::from_op(storage, Layout::contiguous(&shape), self.device().clone(), &[self, other], || {
            Box::new(BinaryBackward { op })
        }))
    }

    /// Elementwise `self + other` with NumPy broadcasting; shapes that do not broadcast are
    /// [`Error::Shape`](crate::Error::Shape), tensors on two devices [`Error::DeviceMismatch`](crate::Error::DeviceMismatch).
    ///
    /// ```
    /// use rumus::{Device, Error, RawTensor};
    ///
    /// let device = Device::cpu();
    /// let a = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], &device)?;
    /// let row = RawTensor::from_vec(vec![10.0, 20.0], &[2], &device)?; // added to every row
    /// assert_eq!(a.add(&row)?.to_vec()?, [11.0, 22.0, 13.0, 24.0]);
    /// let three = RawTensor::zeros(&[3], &device)?;
    /// assert!(matches!(a.add(&three), Err(Error::Shape { .. })));
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn add(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Add, other)
    }
    /// Elementwise `self - other` with broadcasting (errors as [`RawTensor::add`]).
    pub fn sub(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Sub, other)
    }
    /// Elementwise `self * other` with broadcasting (errors as [`RawTensor::add`]).
    pub fn mul(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Mul, other)
    }
    /// Elementwise `self / other` with broadcasting (errors as [`RawTensor::add`]); division by
    /// zero gives ±inf or NaN as in IEEE arithmetic.
    pub fn div(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Div, other)
    }
    /// Elementwise larger value, with broadcasting; the gradient goes to the larger input (split
    /// evenly on ties, as PyTorch does).
    pub fn maximum(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Maximum, other)
    }
    /// Elementwise smaller value, with broadcasting; the gradient goes to the smaller input (split
    /// evenly on ties).
    pub fn minimum(&self, other: &RawTensor) -> Result<RawTensor> {
        self.binary(BinaryOp::Minimum, other)
    }
    /// `x ^ y` elementwise with broadcasting, as `exp(y * ln x)` (defined for x > 0).
    pub fn pow(&self, exponent: &RawTensor) -> Result<RawTensor> {
        self.log()?.mul(exponent)?.exp()
    }
}
