//! Scaled dot-product attention: `softmax(q kᵀ · scale + mask) v` over the last two axes.
//!
//! The causal mask is aligned bottom-right (as in FlashAttention): with `tq` queries and `tk`
//! keys, query `i` sees keys `0 ..= i + (tk - tq)`. A full causal pass has `tq == tk`; a
//! decoding step with a key/value cache has one query that sees every cached key.
//!
//! [`RawTensor::packed_attention`] is a transformer's multi-head self-attention over its packed
//! `q | k | v` projection, read in place by the same kernels ([`AttentionLayout::Packed`]).
//!
//! [`RawTensor::scaled_dot_product_attention`] runs the device's fused kernels
//! ([`Backend::attention_forward`](crate::backend::Backend::attention_forward)), which never
//! store the `[tq, tk]` scores, and falls back to the composed [`RawTensor::attention_reference`]
//! on the same device where the backend has no fused kernel for the sizes (on wgpu: a head
//! dimension above 128), where values are wider than queries (`dv != d`) or where an axis is
//! empty.

use crate::autograd::BackwardOp;
use crate::backend::{AttentionArgs, AttentionLayout};
use crate::layout::Layout;
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
        let grads = self.grads(q, k, v, grad)?;
        // [dq | dk | dv] in one storage: each input's gradient is a view of its part.
        let wrap = |t: &RawTensor, offset: usize| -> Result<Option<RawTensor>> {
            if !t.requires_grad() {
                return Ok(None);
            }
            let layout = Layout::new(t.shape().to_vec(), crate::layout::contiguous_strides(t.shape()), offset)?;
            Ok(Some(RawTensor::from_storage(grads.clone(), layout, t.device().clone())))
        };
        let [dq, dk, dv] = self.args.grad_offsets();
        Ok(vec![wrap(q, dq)?, wrap(k, dk)?, wrap(v, dv)?])
    }
}

impl AttentionBackward {
    /// The storage of the gradients of q, k and v (one input when packed) at
    /// [`AttentionArgs::grad_offsets`].
    fn grads(&self, q: &RawTensor, k: &RawTensor, v: &RawTensor, grad: &RawTensor) -> Result<crate::backend::Storage> {
        let grad = grad.contiguous()?;
        q.device().backend().attention_backward(
            q.storage(),
            k.storage(),
            v.storage(),
            self.out.storage(),
            self.lse.storage(),
            grad.storage(),
            &self.args,
        )
    }
}

/// The backward of [`RawTensor::packed_attention`]: the gradient of the projection, in its layout.
struct PackedAttentionBackward(AttentionBackward);

impl BackwardOp for PackedAttentionBackward {
    fn name(&self) -> &'static str {
        "packed_attention"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let [qkv] = inputs else {
            return Err(Error::invalid("packed_attention", format!("backward expects 1 input, got {}", inputs.len())));
        };
        let grads = self.0.grads(qkv, qkv, qkv, grad)?;
        Ok(vec![Some(RawTensor::from_kernel(grads, qkv.shape(), qkv.device()))])
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
        let scale = 1.0 / (d as f32).sqrt();
        let args = AttentionArgs { batch, tq, tk, d, scale, causal, layout: AttentionLayout::Separate };
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

    /// Multi-head self-attention of a transformer's packed projection `self [n, t, 3·heads·d]`
    /// (queries, then keys, then values along the last axis, each `heads` heads of `d`
    /// features, as a `Linear(embed, 3·embed)` makes them), scaled by `1/√d`: returns the heads'
    /// outputs merged, `[n, t, heads·d]`. The same as splitting the heads out
    /// ([`RawTensor::split_heads`]), [`RawTensor::scaled_dot_product_attention`] and merging
    /// them back ([`RawTensor::merge_heads`]), but where the device has a fused kernel it reads
    /// the projection and writes the output and the projection's gradient in place, with none
    /// of the copies between the layouts.
    pub fn packed_attention(&self, heads: usize, causal: bool) -> Result<RawTensor> {
        const OP: &str = "packed_attention";
        self.check_f32(OP)?;
        let [n, t, d] = self.packed_heads(OP, heads)?;
        let batch = n
            .checked_mul(heads)
            .ok_or_else(|| Error::invalid(OP, format!("{n} sequences of {heads} heads overflow")))?;
        if [batch, t, d].contains(&0) {
            return self.packed_attention_composed(heads, causal);
        }
        let layout = AttentionLayout::Packed { heads };
        let args = AttentionArgs { batch, tq: t, tk: t, d, scale: 1.0 / (d as f32).sqrt(), causal, layout };
        args.check(OP)?;
        let qkv = self.contiguous()?;
        let device = self.device();
        let Some((out, lse)) =
            device.backend().attention_forward(qkv.storage(), qkv.storage(), qkv.storage(), &args)?
        else {
            return self.packed_attention_composed(heads, causal);
        };
        let shape = [n, t, heads * d];
        let saved_out = RawTensor::from_kernel(out.clone(), &shape, device);
        let lse = RawTensor::from_kernel(lse, &[batch, t], device);
        Ok(RawTensor::from_op_contiguous(out, &shape, device, &[&qkv], || {
            Box::new(PackedAttentionBackward(AttentionBackward { out: saved_out, lse, args }))
        }))
    }

    /// [`RawTensor::packed_attention`] composed of views, copies and the attention op.
    fn packed_attention_composed(&self, heads: usize, causal: bool) -> Result<RawTensor> {
        let [q, k, v] = self.split_heads(heads)?;
        q.scaled_dot_product_attention(&k, &v, causal)?.merge_heads()
    }

    /// The queries, keys and values `[n, heads, t, d]` (each contiguous) of a packed projection
    /// `self [n, t, 3·heads·d]` (see [`RawTensor::packed_attention`]).
    pub fn split_heads(&self, heads: usize) -> Result<[RawTensor; 3]> {
        let [n, t, d] = self.packed_heads("split_heads", heads)?;
        let embed = heads * d;
        let split = |i: usize| -> Result<RawTensor> {
            self.narrow(-1, i * embed, (i + 1) * embed)?
                .reshape(&[n, t, heads, d])?
                .permute(&[0, 2, 1, 3])?
                .contiguous()
        };
        Ok([split(0)?, split(1)?, split(2)?])
    }

    /// `[n, t, d]` of a packed projection `self [n, t, 3·heads·d]`, or the error `op` names.
    fn packed_heads(&self, op: &'static str, heads: usize) -> Result<[usize; 3]> {
        let &[n, t, width] = self.shape() else {
            return Err(Error::shape(op, format!("{:?}: expected [n, t, 3·heads·d]", self.shape())));
        };
        match heads.checked_mul(3) {
            Some(per_feature) if heads > 0 && width.is_multiple_of(per_feature) => Ok([n, t, width / per_feature]),
            _ => Err(Error::shape(
                op,
                format!("{:?}: the last axis ({width}) must be 3·heads·d for {heads} heads", self.shape()),
            )),
        }
    }

    /// Heads `self [n, heads, t, d]` merged back into `[n, t, heads·d]`.
    pub fn merge_heads(&self) -> Result<RawTensor> {
        let &[n, heads, t, d] = self.shape() else {
            return Err(Error::shape("merge_heads", format!("{:?}: expected [n, heads, t, d]", self.shape())));
        };
        self.permute(&[0, 2, 1, 3])?.reshape(&[n, t, heads * d])
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
