//! Layers made of layers: `Residual` (x + layers(x)) and `Repeat` (the layers n times in a row,
//! expanded in place).

use syn::Error;

use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{err, infer_list, Ctx, Expanded, Producer, Site, MAX_LAYERS};
use crate::parse::Result;
use crate::spec::fmt_shape;

pub fn residual(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let inner = b.layers();
    // The block's input is added to its output, so it holds features, never token indices.
    if let Some(e) = inner.iter().find(|l| l.name == "Embedding") {
        return Err(err(
            e,
            format!(
                "{e} cannot be inside Residual: Residual adds its input to the block's output, so the block works on features, not token indices\nhint: put the Embedding before the Residual block, e.g. `Embedding(..), Residual(..)`"
            ),
        ));
    }
    let input =
        Producer { indices: false, ..Producer::input(format!("the input of {}", call.name), prod.shape.clone()) };
    let (outs, mut last) = ctx.nested(|ctx| infer_list(inner, input, ctx))?;
    if last.shape != prod.shape {
        last.what = format!("its last layer {}", last.what);
        return Err(err(
            call,
            format!(
                "Residual adds its input to its layers' output, so the layers must keep the shape {}, but {}\nhint: end the block with a layer that restores {}",
                fmt_shape(&prod.shape),
                last.got(),
                fmt_shape(&prod.shape)
            ),
        ));
    }
    let names: Vec<String> = outs.iter().map(|o| o.display.clone()).collect();
    Ok(Layer {
        trainable: outs.iter().fold(0u128, |a, o| a.saturating_add(o.trainable)),
        buffers: outs.iter().fold(0u128, |a, o| a.saturating_add(o.buffers)),
        display: format!("Residual({})", names.join(", ")),
        ..s.same_shape(LayerKind::Residual { layers: outs })
    })
}

/// `Repeat(n, layers..)`: the layers inferred `n` times in a row, each copy from the previous
/// copy's output, as if written out `n` times.
pub fn repeat(s: &Site, ctx: &mut Ctx) -> Result<Expanded> {
    let (b, prod) = (s.args, s.input);
    let n = b.usize("n").unwrap_or(1);
    if n > MAX_LAYERS {
        return Err(err(
            s.arg_tokens("n"),
            format!("Repeat({n}, ..) would expand to more than {MAX_LAYERS} layers, more than #[model] builds"),
        ));
    }
    let inner = b.layers();
    let mut outs = Vec::new();
    let mut next = prod.clone();
    for copy in 0..n {
        let (more, last) = infer_list(inner, next, ctx).map_err(|e| in_copy(e, copy, n))?;
        outs.extend(more);
        next = last;
    }
    Ok((outs, next))
}

/// Adds to every message of `e` which copy of a `Repeat` it is about (for copies after the first,
/// whose input is the previous copy's output).
fn in_copy(e: Error, copy: usize, n: usize) -> Error {
    if copy == 0 {
        return e;
    }
    let mut all: Option<Error> = None;
    for one in e {
        let more = Error::new(
            one.span(),
            format!("{one}\nnote: in copy {} of {n} of the Repeat, whose input is the output of copy {copy}", copy + 1),
        );
        match &mut all {
            Some(a) => a.combine(more),
            None => all = Some(more),
        }
    }
    all.unwrap_or_else(|| Error::new(proc_macro2::Span::call_site(), "Repeat failed"))
}
