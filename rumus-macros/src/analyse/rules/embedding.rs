//! `Embedding` (token indices [T] → [T, dim]) and `PositionalEmbedding` ([T, E], a learned
//! vector added per position).

use super::attention::sequence;
use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{err, Ctx, Site};
use crate::parse::Result;

pub fn embedding(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (num, dim) = (b.usize("num").unwrap_or(1), b.usize("dim").unwrap_or(1));
    if !prod.indices {
        return Err(err(
            call,
            format!(
                "{call} expects token indices [T] from the input, but {}, which are not indices\nhint: put the Embedding first, on an input such as `input = [T]`",
                prod.got()
            ),
        ));
    }
    let [t] = prod.shape.as_slice() else {
        let (what, hint) = match prod.shape.len() {
            3 => (
                "an image, not token indices",
                "Embedding maps token ids (words, categories) to vectors; an image starts with e.g. `Conv2d(..)`, or `Flatten` then `Linear(..)`",
            ),
            2 => (
                "a sequence of feature vectors, not one index per position",
                "Embedding needs one token index per position, `input = [T]`; vectors of features go through `Linear(..)`",
            ),
            _ => ("not a sequence of token indices", "Embedding needs one token index per position, `input = [T]`"),
        };
        return Err(err(call, format!("{call} expects token indices [T], but {}, {what}\nhint: {hint}", prod.got())));
    };
    // Without `std`, `Embedding::new`: `with_std(.., 1.0, ..)`, PyTorch's N(0, 1).
    let std = b.given("std").then(|| b.float("std", 1.0) as f32);
    let kind = LayerKind::Embedding { num, dim, std, seed: ctx.seed() };
    Ok(Layer {
        trainable: (num as u128) * (dim as u128),
        display: format!("Embedding({num}, {dim})"),
        ..s.layer(kind, vec![*t, dim])
    })
}

pub fn positional_embedding(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let block = b.usize("block").unwrap_or(1);
    let (t, e) = sequence(call, prod)?;
    if t > block {
        return Err(err(
            call,
            format!(
                "{call} holds positions for sequences of at most block length {block}, but {} (T = {t})\nhint: write `PositionalEmbedding({t})`: the block length must be at least the sequence length {t}",
                prod.got()
            ),
        ));
    }
    let std = b.float("std", 0.02) as f32;
    let kind = LayerKind::PositionalEmbedding { block, dim: e, std, seed: ctx.seed() };
    Ok(Layer {
        trainable: (block as u128) * (e as u128),
        display: format!("PositionalEmbedding({block}, E = {e})"),
        ..s.same_shape(kind)
    })
}
