//! Multi-head self-attention with PyTorch's parameter names and initialisation.

use super::{init, join_name, Linear, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Self-attention over `[n, t, e]`: `softmax(Q Kᵀ / √d) V` per head (`d = e / heads`), then an
/// output projection. Parameters: `in_proj_weight [3e, e]`, `in_proj_bias [3e]`,
/// `out_proj.weight [e, e]`, `out_proj.bias [e]`. No mask: every position attends to all.
pub struct MultiHeadAttention {
    pub in_proj_weight: Param,
    pub in_proj_bias: Param,
    pub out_proj: Linear,
    embed_dim: usize,
    num_heads: usize,
}

impl MultiHeadAttention {
    /// PyTorch's init: Xavier-uniform `in_proj_weight`, zero biases, default-`Linear`
    /// `out_proj.weight`.
    pub fn new(device: &Device, embed_dim: usize, num_heads: usize, seed: u64) -> Result<Self> {
        if embed_dim == 0 || num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::invalid(
                "MultiHeadAttention",
                format!("embed_dim {embed_dim} must be a positive multiple of num_heads {num_heads}"),
            ));
        }
        let in_proj_weight =
            Param::new(init::xavier_uniform(&[3 * embed_dim, embed_dim], embed_dim, 3 * embed_dim, seed, device)?)?;
        let in_proj_bias = Param::new(RawTensor::zeros(&[3 * embed_dim], device)?)?;
        let out_proj = Linear::new(device, embed_dim, embed_dim, true, seed.wrapping_add(1))?;
        if let Some(bias) = &out_proj.bias {
            bias.assign(&RawTensor::zeros(&[embed_dim], device)?)?;
        }
        Ok(MultiHeadAttention { in_proj_weight, in_proj_bias, out_proj, embed_dim, num_heads })
    }

    pub fn embed_dim(&self) -> usize {
        self.embed_dim
    }

    pub fn num_heads(&self) -> usize {
        self.num_heads
    }
}

impl Module for MultiHeadAttention {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let e = self.embed_dim;
        if x.rank() != 3 || x.shape()[2] != e {
            return Err(Error::shape(
                "MultiHeadAttention",
                format!("input {:?}: expected [batch, time, {e}]", x.shape()),
            ));
        }
        let (n, t, heads) = (x.shape()[0], x.shape()[1], self.num_heads);
        let head_dim = e / heads;
        let qkv = x.matmul(&self.in_proj_weight.tensor().transpose(0, 1)?)?.add(self.in_proj_bias.tensor())?;
        // [n, t, e] slice → [n, heads, t, head_dim]
        let split = |i: usize| -> Result<RawTensor> {
            qkv.narrow(-1, i * e, (i + 1) * e)?.reshape(&[n, t, heads, head_dim])?.permute(&[0, 2, 1, 3])
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?);
        let scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(1.0 / (head_dim as f32).sqrt())?;
        let context = scores.softmax(-1)?.matmul(&v)?;
        let merged = context.permute(&[0, 2, 1, 3])?.reshape(&[n, t, e])?;
        self.out_proj.forward_raw(&merged)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "in_proj_weight"), &self.in_proj_weight);
        visitor(&join_name(prefix, "in_proj_bias"), &self.in_proj_bias);
        self.out_proj.visit_params(&join_name(prefix, "out_proj"), visitor);
    }

    fn describe(&self) -> String {
        format!("MultiHeadAttention(embed_dim = {}, num_heads = {})", self.embed_dim, self.num_heads)
    }
}
