//! Matrix products: `[..., m, k] @ [..., k, n]` with the batch axes broadcast.

use crate::autograd::BackwardOp;
use crate::backend::{MatmulArgs, MatrixLayout};
use crate::layout::broadcast_shapes;
use crate::tensor::RawTensor;
use crate::{Error, Result};

struct MatmulBackward;

impl BackwardOp for MatmulBackward {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        // Transposes are free views: the kernel takes strides. An operand that needs no gradient
        // (input data, or a first conv layer's unfolded input) skips its product entirely.
        // Each gradient is computed in its operand's memory order (see `in_layout_of`).
        let ga = a
            .requires_grad()
            .then(|| in_layout_of(a, grad, &b.transpose(-1, -2)?)?.sum_to_shape(a.shape()))
            .transpose()?;
        let gb = b.requires_grad().then(|| rhs_gradient(a, b, grad)).transpose()?;
        Ok(vec![ga, gb])
    }
}

/// The gradient of the rhs `b` of `a @ b` given the output's gradient. When `b` is one matrix
/// shared by every batch (a linear layer's weight), the batch folds into the inner axis:
/// `aᵀ @ grad` over `[batch·m, k]` and `[batch·m, n]`, one product instead of a batched one
/// whose `[batch, k, n]` result would be summed.
fn rhs_gradient(a: &RawTensor, b: &RawTensor, grad: &RawTensor) -> Result<RawTensor> {
    let (ra, rb) = (a.rank(), b.rank());
    if grad.rank() < 2 {
        return Err(Error::shape("matmul", format!("gradient {:?}: expected rank >= 2", grad.shape())));
    }
    let shared = b.shape()[..rb - 2].iter().all(|&d| d == 1);
    let batch: usize = grad.shape()[..grad.rank() - 2].iter().product();
    let unbroadcast = a.shape()[..ra - 2] == grad.shape()[..grad.rank() - 2];
    if shared && batch > 1 && unbroadcast {
        let (m, k, n) = (a.shape()[ra - 2], a.shape()[ra - 1], b.shape()[rb - 1]);
        let a_flat = a.reshape(&[batch * m, k])?;
        let grad_flat = grad.reshape(&[batch * m, n])?;
        return in_layout_of(b, &a_flat.transpose(-1, -2)?, &grad_flat)?.reshape(b.shape());
    }
    in_layout_of(b, &a.transpose(-1, -2)?, grad)?.sum_to_shape(b.shape())
}

/// `lhs @ rhs`, the gradient of `operand`, computed as `(rhsᵀ @ lhsᵀ)ᵀ` when `operand` is a
/// transposed view (its last two axes column-major, as `x @ w.T` makes of a linear layer's
/// weight). The gradient then has the operand's memory order, and once the transpose's own
/// backward turns it round it is contiguous, so the optimizer reads it without a copy.
fn in_layout_of(operand: &RawTensor, lhs: &RawTensor, rhs: &RawTensor) -> Result<RawTensor> {
    let strides = operand.layout().strides();
    let shape = operand.shape();
    let rank = shape.len();
    let transposed = rank >= 2 && strides[rank - 2] == 1 && shape[rank - 2] > 1 && shape[rank - 1] > 1;
    if transposed {
        rhs.transpose(-1, -2)?.matmul(&lhs.transpose(-1, -2)?)?.transpose(-1, -2)
    } else {
        lhs.matmul(rhs)
    }
}

/// Describes `t` (already broadcast to `[batch..., rows, cols]`) as one strided batch of
/// matrices, copying only when its batch axes cannot be walked with a single stride.
fn matrix_view(t: &RawTensor, batch_rank: usize) -> Result<(RawTensor, MatrixLayout)> {
    let strides = t.layout().strides();
    let shape = t.shape();
    let mut batch_stride = None;
    let mut uniform = true;
    // Walk batch axes from innermost: each must continue the previous one's stride.
    let mut expected: Option<usize> = None;
    for axis in (0..batch_rank).rev() {
        if shape[axis] == 1 {
            continue;
        }
        match expected {
            None => {
                batch_stride = Some(strides[axis]);
                expected = Some(strides[axis].saturating_mul(shape[axis]));
            }
            Some(e) => {
                let all_broadcast = batch_stride == Some(0) && strides[axis] == 0;
                if strides[axis] != e && !all_broadcast {
                    uniform = false;
                }
                expected = Some(strides[axis].saturating_mul(shape[axis]));
            }
        }
    }
    let t = if uniform { t.clone() } else { t.contiguous()? };
    let rank = t.rank();
    let s = t.layout().strides();
    let batch_stride = if uniform { batch_stride.unwrap_or(0) } else { shape[rank - 2] * shape[rank - 1] };
    let layout =
        MatrixLayout { offset: t.layout().offset(), batch_stride, row_stride: s[rank - 2], col_stride: s[rank - 1] };
    Ok((t, layout))
}

impl RawTensor {
    /// `self [.., m, k] @ other [k, n]` for a contiguous `self`, as one `[(..)·m, k] @ [k, n]`
    /// product (a linear layer over a batch of sequences): one large product instead of a batch
    /// of small ones that each pack the shared rhs again; reshapes carry the gradients.
    fn matmul_folded(&self, other: &RawTensor) -> Result<RawTensor> {
        let rank = self.rank();
        let k = self.shape()[rank - 1];
        let rows = crate::layout::checked_numel("matmul", &self.shape()[..rank - 1])?;
        let product = self.reshape(&[rows, k])?.matmul(other)?;
        let mut shape = self.shape().to_vec();
        shape[rank - 1] = other.shape()[1];
        product.reshape(&shape)
    }

    /// Matrix product of the last two axes; leading axes broadcast (NumPy `matmul` rules for
    /// rank ≥ 2).
    ///
    /// ```
    /// use rumus::{Device, Error, RawTensor};
    ///
    /// let device = Device::cpu();
    /// let a = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &device)?;
    /// let b = RawTensor::from_vec(vec![1.0, 0.0, -1.0], &[3, 1], &device)?;
    /// assert_eq!(a.matmul(&b)?.to_vec()?, [-2.0, -2.0]);
    /// // [2, 3] @ [2, 3]: the inner sizes differ.
    /// assert!(matches!(a.matmul(&a), Err(Error::Shape { op: "matmul", .. })));
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn matmul(&self, other: &RawTensor) -> Result<RawTensor> {
        self.check_f32("matmul")?;
        other.check_f32("matmul")?;
        self.check_same_device("matmul", other)?;
        if self.rank() < 2 || other.rank() < 2 {
            return Err(Error::shape(
                "matmul",
                format!("lhs {:?} rhs {:?}: both operands need rank >= 2", self.shape(), other.shape()),
            ));
        }
        let (ra, rb) = (self.rank(), other.rank());
        let (m, k) = (self.shape()[ra - 2], self.shape()[ra - 1]);
        let (k2, n) = (other.shape()[rb - 2], other.shape()[rb - 1]);
        if k != k2 {
            return Err(Error::shape(
                "matmul",
                format!("lhs {:?} rhs {:?}: inner dims {k} and {k2} differ", self.shape(), other.shape()),
            ));
        }
        if rb == 2 && ra > 2 && self.is_contiguous() {
            return self.matmul_folded(other);
        }
        let batch_shape = broadcast_shapes("matmul", &self.shape()[..ra - 2], &other.shape()[..rb - 2])?;
        let batch: usize = batch_shape.iter().product();
        let with = |rows: usize, cols: usize| {
            let mut s = batch_shape.clone();
            s.extend([rows, cols]);
            s
        };
        crate::layout::checked_numel("matmul", &with(m, n))?;
        let a = self.broadcast_to(&with(m, k))?;
        let b = other.broadcast_to(&with(k, n))?;
        let (a, lhs) = matrix_view(&a, batch_shape.len())?;
        let (b, rhs) = matrix_view(&b, batch_shape.len())?;
        let args = MatmulArgs { batch, m, k, n, lhs, rhs };
        let storage = self.device().backend().matmul(a.storage(), b.storage(), &args)?;
        Ok(RawTensor::from_op_contiguous(storage, &with(m, n), self.device(), &[self, other], || {
            Box::new(MatmulBackward)
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, RawTensor};

    /// `[b, m, k] @ [k, n]` and its gradients, with the rhs shared as a matrix (folded into one
    /// product) or broadcast to `[b, k, n]` (a batch of products).
    fn product_and_grads(a: &[f32], b: &[f32], w: &[f32], dims: [usize; 4], expand: bool) -> [Vec<f32>; 3] {
        let [batch, m, k, n] = dims;
        let dev = Device::cpu();
        let ta = RawTensor::from_slice(a, &[batch, m, k], &dev).unwrap().requires_grad_().unwrap();
        let tb = RawTensor::from_slice(b, &[k, n], &dev).unwrap().requires_grad_().unwrap();
        let rhs = if expand { tb.broadcast_to(&[batch, k, n]).unwrap() } else { tb.clone() };
        let out = ta.matmul(&rhs).unwrap();
        let weights = RawTensor::from_slice(w, &[batch, m, n], &dev).unwrap();
        let grads = out.mul(&weights).unwrap().sum(&[0, 1, 2], false).unwrap().backward().unwrap();
        [out.to_vec().unwrap(), grads.get(&ta).unwrap().to_vec().unwrap(), grads.get(&tb).unwrap().to_vec().unwrap()]
    }

    #[test]
    fn folded_shared_rhs_products_match_the_batched_ones_and_f64() {
        let dims @ [batch, m, k, n] = [3, 70, 9, 50];
        let pattern =
            |len: usize, p: usize| -> Vec<f32> { (0..len).map(|i| (i * p % 1000) as f32 / 500.0 - 1.0).collect() };
        let (a, b, w) = (pattern(batch * m * k, 7919), pattern(k * n, 104_729), pattern(batch * m * n, 31));
        let folded = product_and_grads(&a, &b, &w, dims, false);
        let batched = product_and_grads(&a, &b, &w, dims, true);
        for (f, g) in folded.iter().zip(&batched) {
            let worst = f.iter().zip(g).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-4, "folded and batched differ by {worst}");
        }
        // Exact gradient of the shared matrix at (0, 0): the sum over every row of the batch.
        let exact: f64 = (0..batch * m).map(|r| a[r * k] as f64 * w[r * n] as f64).sum();
        assert!((folded[2][0] as f64 - exact).abs() < 1e-4, "{} vs {exact}", folded[2][0]);
        let exact_out: f64 = (0..k).map(|j| a[j] as f64 * b[j * n] as f64).sum();
        assert!((folded[0][0] as f64 - exact_out).abs() < 1e-5, "{} vs {exact_out}", folded[0][0]);
    }
}
