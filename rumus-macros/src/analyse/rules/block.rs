//! Layers made of layers: `Residual` (x + layers(x), or shortcut(x) + layers(x) with a projection
//! shortcut) and `Repeat` (the layers n times in a row, expanded in place).

use syn::Error;

use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{check_call, err, infer_list, Ctx, Expanded, Producer, Site, MAX_LAYERS};
use crate::parse::Result;
use crate::spec::fmt_shape;

/// `Residual(layers.., shortcut = ..)`: the layers and the shortcut (the identity unless given)
/// both run from the block's input, and their outputs are added, so they must produce the same
/// shape.
pub fn residual(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (inner, shortcut) = (b.layers(), b.branch("shortcut"));
    // The block's input is added to its output (or projected), so it holds features, never token
    // indices.
    if let Some(e) = inner.iter().chain(shortcut.unwrap_or_default()).find(|l| l.name == "Embedding") {
        return Err(err(
            e,
            format!(
                "{e} cannot be inside Residual: Residual adds its input to the block's output, so the block works on features, not token indices\nhint: put the Embedding before the Residual block, e.g. `Embedding(..), Residual(..)`"
            ),
        ));
    }
    let input =
        Producer { indices: false, ..Producer::input(format!("the input of {}", call.name), prod.shape.clone()) };
    let (outs, mut last) = match ctx.nested(|ctx| infer_list(inner, input.clone(), ctx)) {
        Ok(done) => done,
        Err(mut e) => {
            // The shortcut's layers do not depend on the failed ones: check their names and
            // arguments too, so one build reports those mistakes as well.
            for c in shortcut.unwrap_or_default() {
                if let Err(more) = check_call(c) {
                    e.combine(more);
                }
            }
            return Err(e);
        }
    };
    let Some(shortcut) = shortcut else {
        if last.shape != prod.shape {
            last.what = format!("its last layer {}", last.what);
            let projection = match projection(&prod.shape, &last.shape) {
                Some(p) => format!(
                    ", or give it a projection shortcut that produces {}, e.g. `shortcut = {p}`",
                    fmt_shape(&last.shape)
                ),
                None => String::new(),
            };
            return Err(err(
                call,
                format!(
                    "Residual adds its input to its layers' output, so the layers must keep the shape {}, but {}\nhint: end the block with a layer that restores {}{projection}",
                    fmt_shape(&prod.shape),
                    last.got(),
                    fmt_shape(&prod.shape)
                ),
            ));
        }
        let names: Vec<String> = outs.iter().map(|o| o.display.clone()).collect();
        return Ok(Layer {
            trainable: sum(&outs, |o| o.trainable),
            buffers: sum(&outs, |o| o.buffers),
            display: format!("Residual({})", names.join(", ")),
            ..s.same_shape(LayerKind::Residual { layers: outs, shortcut: None })
        });
    };
    let (side, mut side_last) = ctx.nested(|ctx| infer_list(shortcut, input, ctx))?;
    if side_last.shape != last.shape {
        side_last.what = format!("the shortcut's last layer {}", side_last.what);
        last.what = format!("the layers' last layer {}", last.what);
        let hint = match projection(&prod.shape, &last.shape) {
            Some(p) => format!(
                "the shortcut must turn the block's input {} into {}, e.g. `shortcut = {p}`",
                fmt_shape(&prod.shape),
                fmt_shape(&last.shape)
            ),
            None => format!("end the shortcut with a layer that produces {}", fmt_shape(&last.shape)),
        };
        return Err(err(
            s.arg_tokens("shortcut"),
            format!(
                "Residual adds its shortcut's output to its layers' output, so both must produce the same shape, but {}, and {}\nhint: {hint}",
                last.got(),
                side_last.got()
            ),
        ));
    }
    let names: Vec<String> = outs.iter().map(|o| o.display.clone()).collect();
    let side_names: Vec<String> = side.iter().map(|o| o.display.clone()).collect();
    let output = last.shape.clone();
    Ok(Layer {
        trainable: sum(&outs, |o| o.trainable).saturating_add(sum(&side, |o| o.trainable)),
        buffers: sum(&outs, |o| o.buffers).saturating_add(sum(&side, |o| o.buffers)),
        display: format!("Residual({}, shortcut = ({}))", names.join(", "), side_names.join(", ")),
        ..s.layer(LayerKind::Residual { layers: outs, shortcut: Some(side) }, output)
    })
}

fn sum(layers: &[Layer], f: impl Fn(&Layer) -> u128) -> u128 {
    layers.iter().fold(0u128, |a, o| a.saturating_add(f(o)))
}

/// A shortcut that turns `input` into `output` as ResNet does, for hints: a strided 1×1
/// convolution and batch norm for images (`[C, H, W]` → `[C', ⌈H/s⌉, ⌈W/s⌉]`), a `Linear` for
/// feature vectors and sequences of them.
fn projection(input: &[usize], output: &[usize]) -> Option<String> {
    match (input, output) {
        ([_, h, w], [c, oh, ow]) if *oh > 0 && *ow > 0 => {
            // The smallest stride that brings H down to at most H' (sizes are positive).
            let stride = h.div_ceil(*oh);
            if h.div_ceil(stride) != *oh || w.div_ceil(stride) != *ow {
                return None;
            }
            let stride = if stride == 1 { String::new() } else { format!(", stride = {stride}") };
            Some(format!("(Conv2d({c}, 1{stride}, bias = false), BatchNorm2d)"))
        }
        ([_], [f]) => Some(format!("Linear({f})")),
        ([t, _], [ot, f]) if t == ot => Some(format!("Linear({f})")),
        _ => None,
    }
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
