//! `BatchNorm1d`, `BatchNorm2d` and `LayerNorm`: the shape is kept; parameters per channel or
//! per normalized element.

use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{count, err, numel, Ctx, Site};
use crate::parse::Result;
use crate::spec::{fmt_shape, Shape};

pub fn batch_norm1d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (features, eps, momentum) = batch_norm(s, false)?;
    Ok(batch_norm_layer(s, LayerKind::BatchNorm1d { features, eps, momentum }, features))
}

pub fn batch_norm2d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (features, eps, momentum) = batch_norm(s, true)?;
    Ok(batch_norm_layer(s, LayerKind::BatchNorm2d { features, eps, momentum }, features))
}

/// `BatchNorm2d(16)`: weight and bias trainable, running mean and variance buffers.
fn batch_norm_layer(s: &Site, kind: LayerKind, c: usize) -> Layer {
    Layer {
        trainable: 2 * c as u128,
        buffers: 2 * c as u128,
        display: format!("{}({c})", s.spec.name),
        ..s.same_shape(kind)
    }
}

/// Checks the rank ([C] or [C, L]; [C, H, W] when `two_d`) and the channels; returns the
/// channels, eps and momentum.
fn batch_norm(s: &Site, two_d: bool) -> Result<(usize, f32, f32)> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let shape = &prod.shape;
    let rank_ok = if two_d { shape.len() == 3 } else { shape.len() == 1 || shape.len() == 2 };
    if !rank_ok {
        let (need, other) =
            if two_d { ("an image [C, H, W]", "BatchNorm1d") } else { ("[C] or [C, L]", "BatchNorm2d") };
        let hint = if two_d && shape.len() < 3 || !two_d && shape.len() == 3 {
            format!("use `{other}` for this shape")
        } else {
            "reshape first".to_string()
        };
        return Err(err(call, format!("{call} expects {need}, but {}\nhint: {hint}", prod.got())));
    }
    let c = shape[0];
    if let Some(want) = b.usize("features") {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {}, but {} ({})\nhint: write `{}` to infer the channels, or `{}({c})`",
                    count(want, "channel"),
                    prod.got(),
                    count(c, "channel"),
                    call.name,
                    call.name
                ),
            ));
        }
    }
    Ok((c, b.float("eps", 1e-5) as f32, b.float("momentum", 0.1) as f32))
}

pub fn layer_norm(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let shape = &prod.shape;
    let norm: Shape = match b.dims("shape") {
        None => shape.last().map(|d| vec![*d]).unwrap_or_default(),
        Some(d) if d.iter().all(|x| *x > 0) => d.iter().map(|x| *x as usize).collect(),
        Some(_) => {
            return Err(err(s.arg_tokens("shape"), format!("{call}: the normalized shape must be positive sizes")));
        }
    };
    if norm.len() > shape.len() || shape[shape.len() - norm.len()..] != norm[..] {
        let tail = &shape[shape.len().saturating_sub(norm.len())..];
        return Err(err(
            call,
            format!(
                "{call} normalizes the last axes {}, but {} (last axes {})\nhint: write `LayerNorm` to normalize the last axis, or `LayerNorm({})`",
                fmt_shape(&norm),
                prod.got(),
                fmt_shape(tail),
                tail.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let eps = b.float("eps", 1e-5) as f32;
    let affine = b.bool("affine", true);
    let n = numel(&norm);
    let display = format!("LayerNorm{}", fmt_shape(&norm).replace('[', "(").replace(']', ")"));
    let kind = LayerKind::LayerNorm { shape: norm, eps, affine };
    Ok(Layer { trainable: if affine { 2 * n } else { 0 }, display, ..s.same_shape(kind) })
}
