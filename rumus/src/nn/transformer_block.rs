//! The pre-norm transformer block of GPT-2 and nanoGPT (`Block`).

use super::causal_self_attention::{check_dropout, gpt_linear, residual_std};
use super::{join_name, CausalSelfAttention, Dropout, KvCache, LayerNorm, Linear, Module, Param};
use crate::rng::Rng;
use crate::{Device, Error, RawTensor, Result};

/// nanoGPT's `Block` over `[n, t, embed]`:
/// `x = x + attn(ln_1(x))`, then `x = x + mlp(ln_2(x))` with
/// `mlp = c_proj(gelu(c_fc(x)))` (exact GELU, hidden width `4 · embed`) and dropout.
///
/// Parameters: `ln_1.weight`, `ln_1.bias`, `attn.c_attn.*`, `attn.c_proj.*`, `ln_2.*`,
/// `mlp.c_fc.weight [4e, e]`, `mlp.c_fc.bias`, `mlp.c_proj.weight [e, 4e]`, `mlp.c_proj.bias`:
/// `12e² + 13e` scalars. With `bias = false` neither the linear layers nor the layer norms have
/// biases (`12e² + 2e`), as in nanoGPT.
pub struct TransformerBlock {
    /// The norm before the attention.
    pub ln_1: LayerNorm,
    /// The causal self-attention (`attn.*`).
    pub attn: CausalSelfAttention,
    /// The norm before the MLP.
    pub ln_2: LayerNorm,
    /// The MLP's expansion `e => 4e` (`mlp.c_fc.*`).
    pub c_fc: Linear,
    /// The MLP's projection `4e => e` (`mlp.c_proj.*`).
    pub c_proj: Linear,
    mlp_dropout: Dropout,
    bias: bool,
}

/// nanoGPT's `LayerNorm(ndim, bias)`: weight ones, bias zeros or none, `eps = 1e-5`.
fn gpt_layer_norm(device: &Device, embed: usize, bias: bool) -> Result<LayerNorm> {
    let mut norm = LayerNorm::new(device, &[embed], 1e-5, true)?;
    if !bias {
        norm.bias = None;
    }
    Ok(norm)
}

impl TransformerBlock {
    /// nanoGPT's init: linear weights `N(0, 0.02)`, the two projections into the residual stream
    /// (`attn.c_proj`, `mlp.c_proj`) `N(0, 0.02 / √(2 · depth))`, biases zero, layer norms
    /// identity. `heads` must divide `embed`; `depth` is the model's number of blocks.
    pub fn new(
        device: &Device,
        embed: usize,
        heads: usize,
        dropout: f32,
        bias: bool,
        depth: usize,
        seed: u64,
    ) -> Result<Self> {
        const OP: &str = "TransformerBlock";
        check_dropout(OP, dropout)?;
        let proj_std = residual_std(OP, depth)?;
        let hidden = embed.checked_mul(4).ok_or_else(|| Error::invalid(OP, format!("embed {embed} overflows")))?;
        let mut rng = Rng::new(seed);
        Ok(TransformerBlock {
            ln_1: gpt_layer_norm(device, embed, bias)?,
            attn: CausalSelfAttention::new(device, embed, heads, dropout, bias, depth, rng.next_seed())?,
            ln_2: gpt_layer_norm(device, embed, bias)?,
            c_fc: gpt_linear(device, embed, hidden, bias, 0.02, rng.next_seed())?,
            c_proj: gpt_linear(device, hidden, embed, bias, proj_std, rng.next_seed())?,
            mlp_dropout: Dropout::new(dropout, rng.next_seed()),
            bias,
        })
    }

    /// The embedding width `e`.
    pub fn embed(&self) -> usize {
        self.attn.embed()
    }

    /// The number of attention heads.
    pub fn heads(&self) -> usize {
        self.attn.heads()
    }

    /// The feed-forward half's branch: `dropout(c_proj(gelu(c_fc(ln_2(x)))))`.
    fn mlp(&self, x: &RawTensor) -> Result<RawTensor> {
        let hidden = self.c_fc.forward_raw(&self.ln_2.forward_raw(x)?)?.gelu()?;
        self.mlp_dropout.forward_raw(&self.c_proj.forward_raw(&hidden)?)
    }

    fn check_input(&self, x: &RawTensor) -> Result<()> {
        let e = self.embed();
        if x.rank() != 3 || x.shape()[2] != e {
            return Err(Error::shape(
                "TransformerBlock",
                format!("input {:?}: expected [batch, time, {e}]", x.shape()),
            ));
        }
        Ok(())
    }
}

impl Module for TransformerBlock {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.check_input(x)?;
        let x = x.add(&self.attn.forward_raw(&self.ln_1.forward_raw(x)?)?)?;
        x.add(&self.mlp(&x)?)
    }

    /// As [`forward_raw`](Module::forward_raw), with the attention reading and extending its
    /// slot of `cache`.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        self.check_input(x)?;
        let x = x.add(&self.attn.forward_cached(&self.ln_1.forward_raw(x)?, cache)?)?;
        x.add(&self.mlp(&x)?)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.ln_1.visit_params(&join_name(prefix, "ln_1"), visitor);
        self.attn.visit_params(&join_name(prefix, "attn"), visitor);
        self.ln_2.visit_params(&join_name(prefix, "ln_2"), visitor);
        let mlp = join_name(prefix, "mlp");
        self.c_fc.visit_params(&join_name(&mlp, "c_fc"), visitor);
        self.c_proj.visit_params(&join_name(&mlp, "c_proj"), visitor);
    }

    fn set_training(&mut self, training: bool) {
        self.attn.set_training(training);
        self.mlp_dropout.set_training(training);
    }

    fn describe(&self) -> String {
        let bias = if self.bias { "" } else { ", bias = false" };
        format!(
            "TransformerBlock(embed = {}, heads = {}, dropout = {}{bias})",
            self.embed(),
            self.heads(),
            self.mlp_dropout.p()
        )
    }
}
