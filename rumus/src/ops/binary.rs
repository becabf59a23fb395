//! Elementwise functions of two tensors with NumPy broadcasting, and the add fused with the
//! ReLU after it ([`RawTensor::add_relu`], a residual connection's sum).

use crate::autograd::BackwardOp;
use crate::backend::{BinaryOp, UnaryOp};
use crate::layout::broadcast_shapes;
use crate::tensor::RawTensor;
use crate::{Error, Layout, Result};

struct BinaryBackward {
    op: BinaryOp,
    /// The forward's output, kept by the ops whose derivative reads it (`AddRelu`'s mask).
    output: Option<RawTensor>,
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
            BinaryOp::AddRelu => {
                // `binary` keeps the output for AddRelu; without it there is no mask to apply.
                let output =
                    self.output.as_ref().ok_or_else(|| Error::invalid("add_relu", "the output was not kept"))?;
                let masked = if wa || wb { Some(relu_mask(output, grad)?) } else { None };
                (masked.clone().filter(|_| wa), masked.filter(|_| wb))
            }
        };
        let to = |g: Option<RawTensor>, shape: &[usize]| g.map(|g| g.sum_to_shape(shape)).transpose();
        Ok(vec![to(ga, a.shape())?, to(gb, b.shape())?])
    }
}

/// `grad` where the ReLU'd output `y` is positive, else 0: ReLU's backward kernel given `y` for
/// its input (`y > 0` exactly where the pre-activation is), so nothing but `y` is kept.
fn relu_mask(y: &RawTensor, grad: &RawTensor) -> Result<RawTensor> {
    let (y, grad) = (y.contiguous()?, grad.contiguous()?);
    if grad.shape() != y.shape() {
        return Err(Error::shape("add_relu", format!("gradient {:?} for an output {:?}", grad.shape(), y.shape())));
    }
    let backend = y.device().backend();
    let storage = backend.unary_backward(UnaryOp::Relu, y.storage(), y.storage(), grad.storage(), y.numel())?;
    Ok(RawTensor::from_kernel(storage, y.shape(), y.device()))
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
        let saved = (op == BinaryOp::AddRelu).then(|| storage.clone());
        Ok(RawTensor::from_op(storage, Layout::contiguous(&shape), self.device().clone(), &[self, other], || {
            let output = saved.map(|s| RawTensor::from_kernel(s, &shape, self.device()));
            Box::new(BinaryBackward { op, output })
        }))
    }

    /// `max(self + other, 0)` in one pass, PyTorch's `F.relu(a + b)`: a residual connection's
    /// sum and the ReLU after it ([`Residual`](crate::nn::Residual)'s `forward_relu_raw`).
    /// Both inputs get the gradient where the output is positive (0 where it is 0, as
    /// [`RawTensor::relu`]'s), masked by the saved output alone. The shapes must be equal (no
    /// broadcasting): otherwise [`Error::Shape`] naming `add_relu` and both shapes.
    ///
    /// ```
    /// use rumus::{Device, RawTensor};
    ///
    /// let device = Device::cpu();
    /// let a = RawTensor::from_vec(vec![1.0, -2.0, 3.0, -4.0], &[2, 2], &device)?;
    /// let b = RawTensor::from_vec(vec![0.5, 1.0, -3.0, 5.0], &[2, 2], &device)?;
    /// assert_eq!(a.add_relu(&b)?.to_vec()?, [1.5, 0.0, 0.0, 1.0]);
    /// assert!(a.add_relu(&RawTensor::zeros(&[4], &device)?).is_err());
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn add_relu(&self, other: &RawTensor) -> Result<RawTensor> {
        if self.shape() != other.shape() {
            return Err(Error::shape(
                BinaryOp::AddRelu.name(),
                format!(
                    "lhs {:?} and rhs {:?}: the shapes must be equal (no broadcasting)",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        self.binary(BinaryOp::AddRelu, other)
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
