//! Scaled dot-product attention: `softmax(q kᵀ · scale + mask) v` over the last two axes.
//!
//! The causal mask is aligned bottom-right (as in FlashAttention): with `tq` queries and `tk`
//! keys, query `i` sees keys `0 ..= i + (tk - tq)`. A full causal pass has `tq == tk`; a
//! decoding step with a key/value cache has one query that sees every cached key.
//!
//! [`RawTensor::scaled_dot_product_attention`] runs the device's fused kernels
//! ([`Backend::attention_forward`](crate::backend::Backend::attention_forward)), which never
//! store the `[tq, tk]` scores, and falls back to the composed [`RawTensor::attention_reference`]
//! on the same device where the backend has no fused kernel for the sizes (on wgpu: a head
//! dimension above 128), where values are wider than queries (`dv != d`) or where an axis is
//! empty.

use crate::autograd::BackwardOp;
use crate::backend::AttentionArgs;
use crate::tensor::RawTensor;
use crate::{Error, Result};

const OP: &str = "scaled_dot_product_attention";

/// The fused kernel's backward: recomputes the scores from the inputs and the saved
/// log-sum-exp of each query's scores.
struct AttentionBackward {
    out: RawTensor,
    lse: RawTensor,
    args: AttentionArgs,
}

impl BackwardOp for AttentionBackward {
    fn name(&self) -> &'static str {
        OP
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let [q, k, v] = inputs else {
            return Err(Error::invalid(OP, format!("backward expects 3 inputs, got {}", inputs.len())));
        };
        let grad = grad.contiguous()?;
        let backend = q.device().backend();
        let (dq, dk, dv) = backend.attention_backward(
            q.storage(),
            k.storage(),
            v.storage(),
            self.out.storage(),
            self.lse.storage(),
            grad.storage(),
            &self.args,
        )?;
        let wrap = |t: &RawTensor, s| t.requires_grad().then(|| RawTensor::from_kernel(s, t.shape(), t.device()));
        Ok(vec![wrap(q, dq), wrap(k, dk), wrap(v, dv)])
    }
}

/// Checks `q [.., tq, d]`, `k [.., tk, d]`, `v [.., tk, dv]` and returns `(tq, tk)`.
fn check_attention(q: &RawTensor, k: &RawTensor, v: &RawTensor, causal: bool) -> Result<(usize, usize)> {
    for t in [q, k, v] {
        t.check_f32(OP)?;
        q.check_same_device(OP, t)?;
    }
    let rank = q.rank();
    if rank < 2 || k.rank() != rank || v.rank() != rank {
        return Err(Error::shape(
            OP,
            format!("q {:?}, k {:?}, v {:?}: expected the same rank, at least 2", q.shape(), k.shape(), v.shape()),
        ));
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let batch_ok = qs[..rank - 2] == ks[..rank - 2] && ks[..rank - 2] == vs[..rank - 2];
    if !batch_ok || qs[rank - 1] != ks[rank - 1] || ks[rank - 2] != vs[rank - 2] {
        return Err(Error::shape(
            OP,
            format!("q {qs:?}, k {ks:?}, v {vs:?}: expected [.., tq, d], [.., tk, d], [.., tk, dv]"),
        ));
    }
    let (tq, tk) = (qs[rank - 2], ks[rank - 2]);
    if causal && tq > tk {
        return Err(Error::shape(OP, format!("causal attention with {tq} queries needs at least {tq} keys, got {tk}")));
    }
    Ok((tq, tk))
}

impl RawTensor {
    /// Attention of queries `self [.., tq, d]` over keys `k [.., tk, d]` and values
    /// `v [.., tk, dv]`, scaled by `1/√d`; `causal` hides later keys (aligned bottom-right).
    /// Returns `[.., tq, dv]`.
    pub fn scaled_dot_product_attention(&self, k: &RawTensor, v: &RawTensor, causal: bool) -> Result<RawTensor> {
        let (tq, tk) = check_attention(self, k, v, causal)?;
        let rank = self.rank();
        let (d, dv) = (self.shape()[rank - 1], v.shape()[rank - 1]);
        let batch = crate::layout::checked_numel(OP, &self.shape()[..rank - 2])?;
        if d != dv || [batch, tq, tk, d].contains(&0) {
            return self.attention_reference(k, v, causal);
        }
        let args = AttentionArgs { batch, tq, tk, d, scale: 1.0 / (d as f32).sqrt(), causal };
        args.check(OP)?;
        let q3 = self.contiguous()?.reshape(&[batch, tq, d])?;
        let k3 = k.contiguous()?.reshape(&[batch, tk, d])?;
        let v3 = v.contiguous()?.reshape(&[batch, tk, d])?;
        let device = self.device();
        let fused = device.backend().attention_forward(q3.storage(), k3.storage(), v3.storage(), &args)?;
        let Some((out, lse)) = fused else {
            return self.attention_reference(k, v, causal);
        };
        let shape = [batch, tq, d];
        let saved_out = RawTensor::from_kernel(out.clone(), &shape, device);
        let lse = RawTensor::from_kernel(lse, &[batch, tq], device);
        let result = RawTensor::from_op_contiguous(out, &shape, device, &[&q3, &k3, &v3], || {
            Box::new(AttentionBackward { out: saved_out, lse, args })
        });
        let mut out_shape = self.shape().to_vec();
        out_shape[rank - 1] = d;
        result.reshape(&out_shape)
    }

    /// The plain composition (scores, mask, softmax, product) that materialises the
    /// `[.., tq, tk]` score matrix: the reference the fused kernels are tested against.
    pub fn attention_reference(&self, k: &RawTensor, v: &RawTensor, causal: bool) -> Result<RawTensor> {
        let (tq, tk) = check_attention(self, k, v, causal)?;
        let d = *self.shape().last().unwrap_or(&1);
        let scores = self.matmul(&k.transpose(-1, -2)?)?.mul_scalar(1.0 / (d as f32).sqrt())?;
        let scores = if causal {
            let shift = tk - tq;
            let mask: Vec<f32> = (0..tq)
                .flat_map(|i| (0..tk).map(move |j| if j <= i + shift { 0.0 } else { f32::NEG_INFINITY }))
                .collect();
            scores.add(&RawTensor::from_vec(mask, &[tq, tk], self.device())?)?
        } else {
            scores
        };
        scores.softmax(-1)?.matmul(v)
    }
}
