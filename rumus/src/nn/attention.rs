//! Multi-head self-attention with PyTorch's parameter names and initialisation.

use super::{init, join_name, KvCache, Linear, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Self-attention over `[n, t, e]`: `softmax(Q Kᵀ / √d) V` per head (`d = e / heads`), then an
/// output projection. Parameters: `in_proj_weight [3e, e]`, `in_proj_bias [3e]`,
/// `out_proj.weight [e, e]`, `out_proj.bias [e]`. No mask by default: every position attends to
/// all; [`MultiHeadAttention::causal`] hides later positions (PyTorch's `is_causal`). Both run
/// [`RawTensor::scaled_dot_product_attention`].
pub struct MultiHeadAttention {
    /// Query, key and value projections stacked: `[3·embed_dim, embed_dim]` (PyTorch's name).
    pub in_proj_weight: Param,
    /// Their biases stacked: `[3·embed_dim]`.
    pub in_proj_bias: Param,
    /// The output projection `embed_dim → embed_dim` (`out_proj.weight`, `out_proj.bias`).
    pub out_proj: Linear,
    embed_dim: usize,
    num_heads: usize,
    causal: bool,
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
        Ok(MultiHeadAttention { in_proj_weight, in_proj_bias, out_proj, embed_dim, num_heads, causal: false })
    }

    /// Sets whether position `i` attends only to positions `0..=i` (builder style).
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }

    /// Whether later positions are hidden.
    pub fn is_causal(&self) -> bool {
        self.causal
    }

    /// Width of the input and output vectors (E in `[T, E]`).
    pub fn embed_dim(&self) -> usize {
        self.embed_dim
    }

    /// Number of heads; each attends over `embed_dim / num_heads` features.
    pub fn num_heads(&self) -> usize {
        self.num_heads
    }
}

impl MultiHeadAttention {
    /// The packed projection `[n, t, 3·embed_dim]` of `x [n, t, embed_dim]`.
    fn project(&self, x: &RawTensor) -> Result<RawTensor> {
        let e = self.embed_dim;
        if x.rank() != 3 || x.shape()[2] != e {
            return Err(Error::shape(
                "MultiHeadAttention",
                format!("input {:?}: expected [batch, time, {e}]", x.shape()),
            ));
        }
        x.matmul(&self.in_proj_weight.tensor().transpose(0, 1)?)?.add(self.in_proj_bias.tensor())
    }
}

impl Module for MultiHeadAttention {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.out_proj.forward_raw(&self.project(x)?.packed_attention(self.num_heads, self.causal)?)
    }

    /// Appends the new keys and values to this layer's slot of `cache` and attends over every
    /// cached position. For a causal layer this equals [`forward_raw`](Module::forward_raw) on the
    /// whole sequence; without the mask, earlier positions (computed before later ones existed)
    /// did not see the later ones, so only the causal form is what a full pass computes.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        let qkv = self.project(x)?.split_heads(self.num_heads)?;
        let context = super::heads::attend_cached("MultiHeadAttention", qkv, self.causal, cache)?;
        self.out_proj.forward_raw(&context.merge_heads()?)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "in_proj_weight"), &self.in_proj_weight);
        visitor(&join_name(prefix, "in_proj_bias"), &self.in_proj_bias);
        self.out_proj.visit_params(&join_name(prefix, "out_proj"), visitor);
    }

    fn describe(&self) -> String {
        let causal = if self.causal { ", causal" } else { "" };
        format!("MultiHeadAttention(embed_dim = {}, num_heads = {}{causal})", self.embed_dim, self.num_heads)
    }
}
