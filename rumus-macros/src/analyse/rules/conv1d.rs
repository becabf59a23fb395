//! The one-dimensional layers: `Conv1d`, `MaxPool1d` and `AvgPool1d`, [C, L] → [C', L'],
//! PyTorch's arithmetic.

use super::conv::{check_groups, out_channels, spatial};
use crate::analyse::plan::{Conv1d, Conv1dPadding, Layer, LayerKind};
use crate::analyse::walk::{err, Ctx, Producer, Site};
use crate::parse::{LayerCall, Result};

pub fn conv1d(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (c, l) = channels_length(call, prod)?;
    let out = out_channels(s, c)?;
    let kernel = b.usize("kernel").unwrap_or(1);
    let stride = b.usize("stride").unwrap_or(1);
    let dilation = b.usize("dilation").unwrap_or(1);
    let groups = b.usize("groups").unwrap_or(1);
    let bias = b.bool("bias", true);
    check_groups(s, c, out, groups)?;
    let (ol, padding) = if b.is_same("padding") {
        if stride != 1 {
            return Err(err(
                s.arg_tokens("padding"),
                format!("{call}: `padding = same` needs stride 1, but the stride is {stride}\nhint: give the padding as a number"),
            ));
        }
        // PyTorch pads d·(k-1) in all, the odd one on the right: any kernel keeps the length.
        (l, Conv1dPadding::Same)
    } else {
        let p = b.usize("padding").unwrap_or(0);
        (spatial(call, prod, "length", l, kernel, stride, p, dilation)?, Conv1dPadding::Explicit(p))
    };
    let weights = (out as u128) * ((c / groups) as u128) * (kernel as u128);
    let config =
        Conv1d { in_channels: c, out_channels: out, kernel, stride, padding, dilation, groups, bias, seed: ctx.seed() };
    Ok(Layer {
        trainable: weights + if bias { out as u128 } else { 0 },
        display: conv1d_display(&config),
        ..s.layer(LayerKind::Conv1d(config), vec![out, ol])
    })
}

/// `Conv1d(4 => 8, kernel = 3, padding = same)`: inferred sizes, arguments that are not defaults.
fn conv1d_display(c: &Conv1d) -> String {
    let mut display = format!("Conv1d({} => {}, kernel = {}", c.in_channels, c.out_channels, c.kernel);
    if c.stride != 1 {
        display.push_str(&format!(", stride = {}", c.stride));
    }
    match c.padding {
        Conv1dPadding::Same => display.push_str(", padding = same"),
        Conv1dPadding::Explicit(0) => {}
        Conv1dPadding::Explicit(p) => display.push_str(&format!(", padding = {p}")),
    }
    if c.dilation != 1 {
        display.push_str(&format!(", dilation = {}", c.dilation));
    }
    if c.groups != 1 {
        display.push_str(&format!(", groups = {}", c.groups));
    }
    if !c.bias {
        display.push_str(", bias = false");
    }
    display.push(')');
    display
}

/// The window of a 1-d pooling layer and its output `[C, L']`.
struct Window {
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    out: Vec<usize>,
}

fn window(s: &Site) -> Result<Window> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (c, l) = channels_length(call, prod)?;
    let kernel = b.usize("kernel").unwrap_or(1);
    let stride = b.usize("stride").unwrap_or(kernel);
    let padding = b.usize("padding").unwrap_or(0);
    let dilation = b.usize("dilation").unwrap_or(1);
    // PyTorch rejects padding above half the kernel: a window could then see only padding.
    if padding > kernel / 2 {
        return Err(err(
            s.arg_tokens("padding"),
            format!(
                "{call}: padding {padding} is more than half the kernel {kernel}\nhint: padding may be at most {}",
                kernel / 2
            ),
        ));
    }
    let ol = spatial(call, prod, "length", l, kernel, stride, padding, dilation)?;
    Ok(Window { kernel, stride, padding, dilation, out: vec![c, ol] })
}

pub fn max_pool1d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let Window { kernel, stride, padding, dilation, out } = window(s)?;
    Ok(s.layer(LayerKind::MaxPool1d { kernel, stride, padding, dilation }, out))
}

pub fn avg_pool1d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let Window { kernel, stride, padding, out, .. } = window(s)?;
    Ok(s.layer(LayerKind::AvgPool1d { kernel, stride, padding }, out))
}

/// Checks a sequence input `[C, L]` and returns it.
fn channels_length(call: &LayerCall, prod: &Producer) -> Result<(usize, usize)> {
    match prod.shape.as_slice() {
        [c, l] => Ok((*c, *l)),
        s => {
            let hint = match s {
                [n] => format!("add a channel axis first with `Reshape(1, {n})`"),
                [c, h, w] => format!(
                    "{call} is one-dimensional; for an image use its 2-D form, or `Reshape({c}, {})` to treat the rows as one sequence",
                    (*h as u128) * (*w as u128)
                ),
                _ => "reshape to [channels, length] first".to_string(),
            };
            Err(err(call, format!("{call} expects a sequence [channels, length], but {}\nhint: {hint}", prod.got())))
        }
    }
}
