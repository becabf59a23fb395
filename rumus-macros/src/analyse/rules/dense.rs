//! `Linear`: [in] → [out] or [T, in] → [T, out], optionally sharing an Embedding's weight.

use crate::analyse::plan::{Layer, LayerKind, LayerRef};
use crate::analyse::walk::{count, err, numel, Ctx, Site, TopLayer};
use crate::parse::Result;
use crate::spec::{self, fmt_shape};
use crate::suggest::did_you_mean;

pub fn linear(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod, shape) = (s.call, s.args, s.input, s.shape());
    let Some((want_in, out)) = b.features() else {
        return Err(err(call, format!("Linear needs its output size\nhint: {}", spec::example("Linear"))));
    };
    if shape.len() > 2 || shape.is_empty() {
        return Err(err(
            call,
            format!(
                "{call} expects a vector of features ([in] or [T, in]), but {}\nhint: insert `Flatten` before {call} to get [{}]",
                prod.got(),
                numel(shape)
            ),
        ));
    }
    let got_in = shape[shape.len() - 1];
    if let Some(want) = want_in {
        check_in_features(s, want, got_in, out)?;
    }
    let bias = b.bool("bias", true);
    let tie = match b.layer_ref("tie") {
        Some((field, index)) => Some(resolve_tie(s, ctx, (field, index), (out, got_in))?),
        None => None,
    };
    let mut out_shape = shape.clone();
    let last = out_shape.len() - 1;
    out_shape[last] = out;
    let weight = if tie.is_some() { 0 } else { (got_in as u128) * (out as u128) };
    let mut display = format!("Linear({got_in} => {out}");
    if !bias {
        display.push_str(", bias = false");
    }
    if let Some(t) = &tie {
        display.push_str(&format!(", tie = {t}"));
    }
    display.push(')');
    let kind = LayerKind::Linear { in_features: got_in, out_features: out, bias, tie, seed: ctx.seed() };
    Ok(Layer { trainable: weight + if bias { out as u128 } else { 0 }, display, ..s.layer(kind, out_shape) })
}

/// `Linear(want => out)` on `got` input features.
fn check_in_features(s: &Site, want: usize, got_in: usize, out: usize) -> Result<()> {
    let (call, shape) = (s.call, s.shape());
    if want == got_in {
        return Ok(());
    }
    // `[28, 28]` into `Linear(784 => ..)`: the user meant to flatten, not to map rows.
    let hint = if shape.len() == 2 && numel(shape) == want as u128 {
        format!(
            "Linear acts on the last axis ({got_in} features per row of {}); insert `Flatten` before {call} to get [{want}]",
            fmt_shape(shape)
        )
    } else {
        format!("write `Linear({out})` to infer the input features, or `Linear({got_in} => {out})`")
    };
    Err(err(call, format!("{call} expects {want} input features, but {}\nhint: {hint}", s.input.got_features())))
}

/// Checks `tie = field.index` of a Linear whose weight is `[out, in]`: it names an Embedding that
/// comes earlier in the model, with weight `[num, dim] == [out, in]`. Records the tie.
fn resolve_tie(s: &Site, ctx: &mut Ctx, (field, index): (&str, usize), (out, inp): (usize, usize)) -> Result<LayerRef> {
    let (call, at) = (s.call, s.arg_tokens("tie"));
    let written = format!("tie = {field}.{index}");
    tie_field(s, ctx, field, &written)?;
    let target = tie_target(s, ctx, (field, index), &written)?;
    let Some((num, dim)) = target.embedding else {
        return Err(err(
            at,
            format!(
                "`{written}` names {}, which is not an Embedding\nhint: a Linear can only share the weight [num, dim] of an `Embedding(num, dim)` layer",
                target.display
            ),
        ));
    };
    if (num, dim) != (out, inp) {
        return Err(err(
            at,
            format!(
                "{call} cannot share the weight of {field}.{index}: its weight is {} (out, in), but {} has weight {} (num, dim)\nhint: a tied Linear maps the {dim} embedding features back to the {num} tokens: `Linear({num}, bias = false, tie = {field}.{index})` on an input of {dim} features",
                fmt_shape(&[out, inp]),
                target.display,
                fmt_shape(&[num, dim])
            ),
        ));
    }
    let key = LayerRef { field: field.to_string(), index };
    if !ctx.tied.contains(&key) {
        ctx.tied.push(key.clone());
    }
    Ok(key)
}

/// The field `tie` names exists, is a layer list, and does not come after this layer's field.
fn tie_field(s: &Site, ctx: &Ctx, field: &str, written: &str) -> Result<()> {
    let at = s.arg_tokens("tie");
    let pos = ctx.fields.iter().position(|(f, _)| f == field);
    let here = ctx.fields.iter().position(|(f, _)| *f == ctx.field);
    let Some(pos) = pos else {
        let names: Vec<&str> = ctx.fields.iter().map(|(f, _)| f.as_str()).collect();
        let mean = match did_you_mean(field, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? "),
            None => String::new(),
        };
        return Err(err(
            at,
            format!(
                "`{written}`: the model has no field `{field}`\nhint: {mean}`tie` names an Embedding of this model as `field.index`; the fields are {}",
                names.join(", ")
            ),
        ));
    };
    if !ctx.fields[pos].1 {
        return Err(err(
            at,
            format!("`{written}`: field `{field}` is a nested model, not a `layers![..]` list\nhint: `tie` names an Embedding of a `layers![..]` field of this model, e.g. `tie = embed.0`"),
        ));
    }
    if here.is_some_and(|h| pos > h) {
        return Err(err(
            at,
            format!("`{written}`: field `{field}` comes after this layer, but the tied Embedding must be built first\nhint: tie to an Embedding in this field or an earlier one"),
        ));
    }
    Ok(())
}

/// The layer `field.index`, among the layers before this one.
fn tie_target(s: &Site, ctx: &Ctx, (field, index): (&str, usize), written: &str) -> Result<TopLayer> {
    let at = s.arg_tokens("tie");
    if let Some(target) = ctx.top.iter().find(|t| t.field == field && t.index == index) {
        return Ok(target.clone());
    }
    let count = ctx.top.iter().filter(|t| t.field == field).count();
    let detail = if field == ctx.field {
        format!(
            "{field}.{index} is not a layer before this one ({field}.0 to {field}.{} come before it)",
            count.saturating_sub(1)
        )
    } else {
        format!(
            "field `{field}` has {} ({field}.0 to {field}.{}), so there is no {field}.{index}",
            count_layers(count),
            count.saturating_sub(1)
        )
    };
    let detail = if count == 0 && field == ctx.field {
        format!("{field}.{index} does not come before this layer, the first of `{field}`")
    } else {
        detail
    };
    Err(err(
        at,
        format!("`{written}`: {detail}\nhint: indices count every layer of the list, each copy of a `Repeat` included"),
    ))
}

/// `1 layer`, `3 layers`.
fn count_layers(n: usize) -> String {
    count(n, "layer")
}
