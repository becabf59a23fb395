//! `MultiHeadAttention`, `CausalSelfAttention` and `TransformerBlock`: [T, E] → [T, E] with E
//! divisible by the number of heads.

use crate::analyse::plan::{Attention, Layer, LayerKind};
use crate::analyse::walk::{err, Ctx, Producer, Site};
use crate::parse::{LayerCall, Result};

pub fn multi_head_attention(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (embed, heads) = heads(s)?;
    let kind = LayerKind::MultiHeadAttention { embed, heads, causal: s.args.bool("causal", false), seed: ctx.seed() };
    let e = embed as u128;
    // PyTorch layout: in_proj [3E, E] + [3E], out_proj [E, E] + [E].
    Ok(attention_layer(s, kind, 4 * e * e + 4 * e, heads, embed))
}

pub fn causal_self_attention(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let a = attention(s, ctx)?;
    let e = a.embed as u128;
    // c_attn [3E, E] (+ [3E]), c_proj [E, E] (+ [E]).
    let trainable = 4 * e * e + if a.bias { 4 * e } else { 0 };
    Ok(attention_layer(s, LayerKind::CausalSelfAttention(a.clone()), trainable, a.heads, a.embed))
}

pub fn transformer_block(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let a = attention(s, ctx)?;
    let e = a.embed as u128;
    // ln_1, attention 4E², ln_2, mlp c_fc [4E, E] and c_proj [E, 4E]; biases 4E + 4E + E
    // and LayerNorm biases 2E, LayerNorm weights 2E.
    let trainable = 12 * e * e + if a.bias { 13 * e } else { 2 * e };
    Ok(attention_layer(s, LayerKind::TransformerBlock(a.clone()), trainable, a.heads, a.embed))
}

/// `CausalSelfAttention(4, E = 48)`: the layer with its parameters, shown with its width.
fn attention_layer(s: &Site, kind: LayerKind, trainable: u128, heads: usize, e: usize) -> Layer {
    Layer { trainable, display: format!("{}({heads}, E = {e})", s.call.name), ..s.same_shape(kind) }
}

/// The arguments of a GPT-2 attention layer, counted for the `depth` of its init.
fn attention(s: &Site, ctx: &mut Ctx) -> Result<Attention> {
    let (embed, heads) = heads(s)?;
    let seed = ctx.seed();
    ctx.attention_layers += 1;
    let (dropout, bias) = (s.args.float("dropout", 0.0) as f32, s.args.bool("bias", true));
    Ok(Attention { embed, heads, dropout, bias, seed })
}

/// The embedding size E of the input [T, E] and the heads, which must divide it.
fn heads(s: &Site) -> Result<(usize, usize)> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let heads = b.usize("heads").unwrap_or(1);
    let (_, e) = sequence(call, prod)?;
    if e % heads != 0 {
        let divisors: Vec<String> = (1..=e.min(64)).filter(|d| e % d == 0).map(|d| d.to_string()).collect();
        return Err(err(
            s.arg_tokens("heads"),
            format!(
                "{call} splits the embedding size E = {e} into {heads} heads of equal size, but heads = {heads} does not divide {e}: {}\nhint: choose heads dividing {e} ({}{})",
                prod.got(),
                divisors.join(", "),
                if e > 64 { ", ..." } else { "" }
            ),
        ));
    }
    Ok((e, heads))
}

/// `[T, E]`, or a spanned error naming what `call` got instead.
pub fn sequence(call: &LayerCall, prod: &Producer) -> Result<(usize, usize)> {
    match prod.shape.as_slice() {
        [t, e] => Ok((*t, *e)),
        _ => {
            let hint = if let ([t], true) = (prod.shape.as_slice(), prod.indices) {
                format!("{call} runs over a sequence of vectors [T, E]; if the {t} values are token indices, put an `Embedding(vocab, dim)` first to get [{t}, dim]")
            } else {
                format!("{call} runs over sequences [T, E], e.g. after `Embedding(vocab, 64)`")
            };
            Err(err(call, format!("{call} expects a sequence [T, E], but {}\nhint: {hint}", prod.got())))
        }
    }
}
