//! `Lstm` and `Gru`: [T, F] → [T, H·dirs], or the last state [H·dirs] without
//! `return_sequences`.

use crate::analyse::plan::{Layer, LayerKind, Recurrent};
use crate::analyse::walk::{err, Ctx, Site};
use crate::parse::Result;
use crate::spec::MAX_DIM;

pub fn lstm(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    recurrent(s, ctx, 4, LayerKind::Lstm)
}

pub fn gru(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    recurrent(s, ctx, 3, LayerKind::Gru)
}

/// The rule of both: per layer and direction G·H·(F_l + H) + 2·G·H parameters (G = `gates`, 4
/// or 3; F_l = F for the first layer, H·dirs after it), as PyTorch counts them.
fn recurrent(s: &Site, ctx: &mut Ctx, gates: u128, kind: fn(Recurrent) -> LayerKind) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let hidden = b.usize("hidden").unwrap_or(1);
    let [t, f] = prod.shape.as_slice() else {
        let hint = match prod.shape.as_slice() {
            [c, h, w] if *c == 1 => {
                format!("insert `Reshape({h}, {w})` before {call} to read the {h} rows as {h} steps of {w} features")
            }
            [t] if prod.indices => {
                format!("the {t} values are token indices: put an `Embedding(vocab, dim)` first to get [{t}, dim]")
            }
            [n] => format!("insert `Reshape({n}, 1)` before {call} for {n} steps of one feature"),
            _ => format!("{call} reads a sequence of feature vectors [T, F]; `Reshape(T, F)` makes one"),
        };
        return Err(err(call, format!("{call} expects a sequence [T, F], but {}\nhint: {hint}", prod.got())));
    };
    let (t, f) = (*t, *f);
    let layers = b.usize("layers").unwrap_or(1);
    let bidirectional = b.bool("bidirectional", false);
    let dropout = b.float("dropout", 0.0) as f32;
    let return_sequences = b.bool("return_sequences", true);
    let dirs: u128 = if bidirectional { 2 } else { 1 };
    let width = hidden as u128 * dirs;
    if width > MAX_DIM as u128 {
        return Err(err(
            s.arg_tokens("hidden"),
            format!("{call} would produce {width} features, more than rumus supports (2^31)"),
        ));
    }
    let h = hidden as u128;
    let per_direction = |features: u128| gates * h * (features + h) + 2 * gates * h;
    let trainable = dirs * (per_direction(f as u128) + (layers as u128 - 1) * per_direction(width));
    let r = Recurrent { features: f, hidden, layers, bidirectional, dropout, return_sequences, seed: ctx.seed() };
    let out = if return_sequences { vec![t, width as usize] } else { vec![width as usize] };
    Ok(Layer { trainable, ..s.layer(kind(r), out) })
}
