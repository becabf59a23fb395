//! Scaled dot-product attention: `softmax(q kᵀ · scale + mask) v` over the last two axes.
//!
//! The causal mask is aligned bottom-right (as in FlashAttention): with `tq` queries and `tk`
//! keys, query `i` sees keys `0 ..= i + (tk - tq)`. A full causal pass has `tq == tk`; a
//! decoding step with a key/value cache has one query that sees every cached key.

use crate::tensor::RawTensor;
use crate::{Error, Result};

/// Checks `q [.., tq, d]`, `k [.., tk, d]`, `v [.., tk, dv]` and returns `(tq, tk)`.
fn check_attention(q: &RawTensor, k: &RawTensor, v: &RawTensor, causal: bool) -> Result<(usize, usize)> {
    const OP: &str = "scaled_dot_product_attention";
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
        self.attention_reference(k, v, causal)
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
