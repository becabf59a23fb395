//! `BatchNorm1d`, `BatchNorm2d`, `LayerNorm`, `GroupNorm`, `InstanceNorm2d` and `RmsNorm`: the
//! shape is kept; parameters per channel or per normalized element.

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
    let norm = trailing_shape(s)?;
    let eps = s.args.float("eps", 1e-5) as f32;
    let affine = s.args.bool("affine", true);
    let n = numel(&norm);
    let display = format!("LayerNorm{}", fmt_shape(&norm).replace('[', "(").replace(']', ")"));
    let kind = LayerKind::LayerNorm { shape: norm, eps, affine };
    Ok(Layer { trainable: if affine { 2 * n } else { 0 }, display, ..s.same_shape(kind) })
}

/// `RmsNorm(shape)`: like `LayerNorm`, a weight of the normalized shape (no bias).
pub fn rms_norm(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let norm = trailing_shape(s)?;
    let eps = s.args.float("eps", 1e-6) as f32;
    let affine = s.args.bool("affine", true);
    let n = numel(&norm);
    let display = format!("RmsNorm{}", fmt_shape(&norm).replace('[', "(").replace(']', ")"));
    let kind = LayerKind::RmsNorm { shape: norm, eps, affine };
    Ok(Layer { trainable: if affine { n } else { 0 }, display, ..s.same_shape(kind) })
}

/// The normalized shape of `LayerNorm` or `RmsNorm`: the given sizes, which must be the input's
/// last axes, or the last axis.
fn trailing_shape(s: &Site) -> Result<Shape> {
    let (call, b, prod, name) = (s.call, s.args, s.input, s.spec.name);
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
                "{call} normalizes the last axes {}, but {} (last axes {})\nhint: write `{name}` to normalize the last axis, or `{name}({})`",
                fmt_shape(&norm),
                prod.got(),
                fmt_shape(tail),
                tail.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(norm)
}

/// `GroupNorm(groups)` over `[C, ...]`: `groups` must divide C; weight and bias `[C]`.
pub fn group_norm(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let c = prod.shape[0];
    let groups = b.usize("groups").unwrap_or(1);
    if let Some(want) = b.usize("channels") {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {}, but {} ({})\nhint: write `GroupNorm({groups})` to infer the channels, or `GroupNorm({groups}, {c})`",
                    count(want, "channel"),
                    prod.got(),
                    count(c, "channel"),
                ),
            ));
        }
    }
    if c % groups != 0 {
        let divisors: Vec<String> = (1..=c.min(64)).filter(|d| c % d == 0).map(|d| d.to_string()).collect();
        return Err(err(
            s.arg_tokens("groups"),
            format!(
                "{call} splits the channels into {groups} groups of equal size, but {groups} does not divide the {}: {}\nhint: choose groups dividing {c} ({}{})",
                count(c, "channel"),
                prod.got(),
                divisors.join(", "),
                if c > 64 { ", ..." } else { "" }
            ),
        ));
    }
    let eps = b.float("eps", 1e-5) as f32;
    let affine = b.bool("affine", true);
    let kind = LayerKind::GroupNorm { groups, channels: c, eps, affine };
    let display = format!("GroupNorm({groups}, {c})");
    Ok(Layer { trainable: if affine { 2 * c as u128 } else { 0 }, display, ..s.same_shape(kind) })
}

/// `InstanceNorm2d` over an image `[C, H, W]`; weight and bias `[C]` with `affine = true`.
pub fn instance_norm2d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let shape = &prod.shape;
    if shape.len() != 3 {
        let hint = if shape.len() == 2 {
            "use `GroupNorm(C)` to normalise each channel of a sequence [C, L]"
        } else {
            "reshape to an image [C, H, W] first"
        };
        return Err(err(call, format!("{call} expects an image [C, H, W], but {}\nhint: {hint}", prod.got())));
    }
    let c = shape[0];
    if let Some(want) = b.usize("features") {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {}, but {} ({})\nhint: write `InstanceNorm2d` to infer the channels, or `InstanceNorm2d({c})`",
                    count(want, "channel"),
                    prod.got(),
                    count(c, "channel"),
                ),
            ));
        }
    }
    let eps = b.float("eps", 1e-5) as f32;
    let affine = b.bool("affine", false);
    let kind = LayerKind::InstanceNorm2d { features: c, eps, affine };
    let display = format!("InstanceNorm2d({c})");
    Ok(Layer { trainable: if affine { 2 * c as u128 } else { 0 }, display, ..s.same_shape(kind) })
}
