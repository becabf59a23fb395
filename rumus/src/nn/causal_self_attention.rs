//! Causal multi-head self-attention as in GPT-2 and nanoGPT (`CausalSelfAttention`).

use super::{init, join_name, Dropout, KvCache, Linear, Module, Param};
use crate::rng::Rng;
use crate::{Device, Error, RawTensor, Result};

/// nanoGPT's attention over `[n, t, embed]`: one fused projection `c_attn` to queries, keys and
/// values, `heads` heads of width `embed / heads`, causal `softmax(q kᵀ / √d) v` through
/// [`RawTensor::scaled_dot_product_attention`], the output projection `c_proj` and residual
/// dropout. Parameters: `c_attn.weight [3e, e]`, `c_attn.bias [3e]`, `c_proj.weight [e, e]`,
/// `c_proj.bias [e]` (no biases with `bias = false`).
///
/// Dropout is applied to the output only: unlike nanoGPT's `attn_dropout`, the attention
/// probabilities are never dropped (the fused attention op does not materialise them).
pub struct CausalSelfAttention {
    /// The fused query, key and value projection `e => 3e`.
    pub c_attn: Linear,
    /// The output projection `e => e`.
    pub c_proj: Linear,
    resid_dropout: Dropout,
    embed: usize,
    heads: usize,
}

/// A `Linear(in => out)` with nanoGPT's init: weight `N(0, std)`, zero bias.
pub(crate) fn gpt_linear(
    device: &Device,
    fan_in: usize,
    out: usize,
    bias: bool,
    std: f32,
    seed: u64,
) -> Result<Linear> {
    let linear = Linear::new(device, fan_in, out, bias, seed)?;
    linear.weight.assign(&init::normal(&[out, fan_in], std, seed, device)?)?;
    if let Some(b) = &linear.bias {
        b.assign(&RawTensor::zeros(&[out], device)?)?;
    }
    Ok(linear)
}

/// nanoGPT's standard deviation for the projections into the residual stream:
/// `0.02 / √(2 · depth)`, with `depth` the number of transformer layers.
pub(crate) fn residual_std(op: &'static str, depth: usize) -> Result<f32> {
    if depth == 0 {
        return Err(Error::invalid(op, "depth (the number of transformer layers) must be positive"));
    }
    Ok(0.02 / ((2 * depth) as f32).sqrt())
}

/// Checks a dropout probability at construction.
pub(crate) fn check_dropout(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(op, format!("dropout {p} must be in [0, 1]")));
    }
    Ok(())
}

impl CausalSelfAttention {
    /// nanoGPT's init: weights `N(0, 0.02)`, `c_proj.weight` `N(0, 0.02 / √(2 · depth))`,
    /// biases zero. `heads` must divide `embed`; `depth` is the model's number of layers.
    pub fn new(
        device: &Device,
        embed: usize,
        heads: usize,
        dropout: f32,
        bias: bool,
        depth: usize,
        seed: u64,
    ) -> Result<Self> {
        const OP: &str = "CausalSelfAttention";
        if embed == 0 || heads == 0 || !embed.is_multiple_of(heads) {
            return Err(Error::invalid(
                OP,
                format!("heads {heads} must divide the embedding size {embed} (both positive)"),
            ));
        }
        check_dropout(OP, dropout)?;
        let proj_std = residual_std(OP, depth)?;
        let three = embed.checked_mul(3).ok_or_else(|| Error::invalid(OP, format!("embed {embed} overflows")))?;
        let mut rng = Rng::new(seed);
        Ok(CausalSelfAttention {
            c_attn: gpt_linear(device, embed, three, bias, 0.02, rng.next_seed())?,
            c_proj: gpt_linear(device, embed, embed, bias, proj_std, rng.next_seed())?,
            resid_dropout: Dropout::new(dropout, rng.next_seed()),
            embed,
            heads,
        })
    }

    /// The embedding width `e`.
    pub fn embed(&self) -> usize {
        self.embed
    }

    /// The number of heads.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The residual dropout probability.
    pub fn dropout(&self) -> f32 {
        self.resid_dropout.p()
    }

    /// The packed projection `[n, t, 3·embed]` of `x [n, t, embed]`.
    fn project(&self, x: &RawTensor) -> Result<RawTensor> {
        let e = self.embed;
        if x.rank() != 3 || x.shape()[2] != e {
            return Err(Error::shape(
                "CausalSelfAttention",
                format!("input {:?}: expected [batch, time, {e}]", x.shape()),
            ));
        }
        self.c_attn.forward_raw(x)
    }

    /// Projects the heads' merged outputs `[n, t, embed]` and drops out.
    fn output(&self, merged: &RawTensor) -> Result<RawTensor> {
        self.resid_dropout.forward_raw(&self.c_proj.forward_raw(merged)?)
    }
}

impl Module for CausalSelfAttention {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.output(&self.project(x)?.packed_attention(self.heads, true)?)
    }

    /// Appends the new keys and values to this layer's cache slot; the new queries attend to
    /// every cached position and causally among themselves.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        let qkv = self.project(x)?.split_heads(self.heads)?;
        self.output(&super::heads::attend_cached("CausalSelfAttention", qkv, true, cache)?.merge_heads()?)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.c_attn.visit_params(&join_name(prefix, "c_attn"), visitor);
        self.c_proj.visit_params(&join_name(prefix, "c_proj"), visitor);
    }

    fn set_training(&mut self, training: bool) {
        self.resid_dropout.set_training(training);
    }

    fn describe(&self) -> String {
        format!("CausalSelfAttention(embed = {}, heads = {}, dropout = {})", self.embed, self.heads, self.dropout())
    }
}
