//! The image layers: `Conv2d`, `ConvTranspose2d`, the 2-d and global pooling layers and
//! `Upsample`, [C, H, W] → [C', H', W'] (or [C]), PyTorch's arithmetic.

use crate::analyse::plan::{Conv2d, ConvTranspose2d, Layer, LayerKind, Pair, UpsampleMode};
use crate::analyse::walk::{count, err, Ctx, Producer, Site};
use crate::parse::{LayerCall, Result};
use crate::spec::{self, MAX_DIM};

pub fn conv2d(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (c, h, w) = image(call, prod)?;
    let out = out_channels(s, c)?;
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or((1, 1));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    let groups = b.usize("groups").unwrap_or(1);
    check_groups(s, c, out, groups)?;
    let padding = conv_padding(s, kernel, stride, dilation)?;
    let oh = spatial(call, prod, "height", h, kernel.0, stride.0, padding.0, dilation.0)?;
    let ow = spatial(call, prod, "width", w, kernel.1, stride.1, padding.1, dilation.1)?;
    let bias = b.bool("bias", true);
    let weights = (out as u128) * ((c / groups) as u128) * (kernel.0 as u128) * (kernel.1 as u128);
    let config =
        Conv2d { in_channels: c, out_channels: out, kernel, stride, padding, dilation, groups, bias, seed: ctx.seed() };
    Ok(Layer {
        trainable: weights + if bias { out as u128 } else { 0 },
        display: conv_display(&config),
        ..s.layer(LayerKind::Conv2d(config), vec![out, oh, ow])
    })
}

/// The output channels of a convolution given `c` input channels; errors when `in => out`
/// disagrees with the input.
pub(super) fn out_channels(s: &Site, c: usize) -> Result<usize> {
    let (call, name) = (s.call, s.spec.name);
    let Some((want_in, out)) = s.args.features() else {
        return Err(err(call, format!("{name} needs its output channels\nhint: {}", spec::example(name))));
    };
    if let Some(want) = want_in {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {want} input channels, but {} ({})\nhint: write `{name}({out}, ...)` to infer the input channels",
                    s.input.got(),
                    count(c, "channel")
                ),
            ));
        }
    }
    Ok(out)
}

/// `Conv2d(3 => 16, kernel = 3, padding = 1)`: inferred sizes, arguments that are not defaults.
fn conv_display(c: &Conv2d) -> String {
    let mut display = format!("Conv2d({} => {}, kernel = {}", c.in_channels, c.out_channels, show_pair(c.kernel));
    for (name, v, default) in
        [("stride", c.stride, (1, 1)), ("padding", c.padding, (0, 0)), ("dilation", c.dilation, (1, 1))]
    {
        if v != default {
            display.push_str(&format!(", {name} = {}", show_pair(v)));
        }
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

/// Input and output channels must both divide into `groups`.
pub(super) fn check_groups(s: &Site, c: usize, out: usize, groups: usize) -> Result<()> {
    let (call, groups_tokens) = (s.call, s.arg_tokens("groups"));
    if !c.is_multiple_of(groups) {
        return Err(err(
            groups_tokens,
            format!("{call} needs input channels divisible by groups = {groups}, but {} ({})\nhint: choose groups dividing {c}", s.input.got(), count(c, "channel")),
        ));
    }
    if !out.is_multiple_of(groups) {
        return Err(err(
            groups_tokens,
            format!("{call} needs output channels divisible by groups = {groups}, but it has {out} output channels\nhint: choose groups dividing both {c} and {out}"),
        ));
    }
    Ok(())
}

/// The padding, `same` resolved (stride 1 and an odd dilated kernel only).
fn conv_padding(s: &Site, kernel: Pair, stride: Pair, dilation: Pair) -> Result<Pair> {
    let (call, b) = (s.call, s.args);
    if !b.is_same("padding") {
        return Ok(b.pair("padding").unwrap_or((0, 0)));
    }
    let pad_tokens = s.arg_tokens("padding");
    if stride != (1, 1) {
        return Err(err(
            pad_tokens,
            format!("{call}: `padding = same` needs stride 1, but the stride is {stride:?}\nhint: give the padding as a number"),
        ));
    }
    let total = (dilation.0 * (kernel.0 - 1), dilation.1 * (kernel.1 - 1));
    if !total.0.is_multiple_of(2) || !total.1.is_multiple_of(2) {
        return Err(err(
            pad_tokens,
            format!("{call}: `padding = same` needs an odd kernel (it pads both sides equally), but the kernel is {kernel:?}\nhint: use an odd kernel or give the padding as a number"),
        ));
    }
    Ok((total.0 / 2, total.1 / 2))
}

pub(super) fn show_pair((a, b): (usize, usize)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("({a}, {b})")
    }
}

pub fn conv_transpose2d(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let (call, b) = (s.call, s.args);
    let (c, h, w) = image(call, s.input)?;
    let out = out_channels(s, c)?;
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or((1, 1));
    let padding = b.pair("padding").unwrap_or((0, 0));
    let output_padding = b.pair("output_padding").unwrap_or((0, 0));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    let groups = b.usize("groups").unwrap_or(1);
    let bias = b.bool("bias", true);
    check_groups(s, c, out, groups)?;
    if output_padding.0 >= stride.0 || output_padding.1 >= stride.1 {
        return Err(err(
            s.arg_tokens("output_padding"),
            format!(
                "{call}: output_padding {} must be smaller than the stride {}\nhint: output_padding picks one of the `stride` output sizes that downsampling by the stride maps to the same input size",
                show_pair(output_padding),
                show_pair(stride)
            ),
        ));
    }
    let oh = transposed_extent(s, "height", h, kernel.0, stride.0, padding.0, output_padding.0, dilation.0)?;
    let ow = transposed_extent(s, "width", w, kernel.1, stride.1, padding.1, output_padding.1, dilation.1)?;
    let weights = (c as u128) * ((out / groups) as u128) * (kernel.0 as u128) * (kernel.1 as u128);
    let config = ConvTranspose2d {
        in_channels: c,
        out_channels: out,
        kernel,
        stride,
        padding,
        output_padding,
        dilation,
        groups,
        bias,
        seed: ctx.seed(),
    };
    Ok(Layer {
        trainable: weights + if bias { out as u128 } else { 0 },
        display: conv_transpose_display(&config),
        ..s.layer(LayerKind::ConvTranspose2d(config), vec![out, oh, ow])
    })
}

/// `ConvTranspose2d(16 => 8, kernel = 3, stride = 2)`: inferred sizes, arguments that are not
/// defaults.
fn conv_transpose_display(c: &ConvTranspose2d) -> String {
    let mut display =
        format!("ConvTranspose2d({} => {}, kernel = {}", c.in_channels, c.out_channels, show_pair(c.kernel));
    for (name, v, default) in [
        ("stride", c.stride, (1, 1)),
        ("padding", c.padding, (0, 0)),
        ("output_padding", c.output_padding, (0, 0)),
        ("dilation", c.dilation, (1, 1)),
    ] {
        if v != default {
            display.push_str(&format!(", {name} = {}", show_pair(v)));
        }
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

/// The output length of a transposed convolution along one axis, or a spanned error.
#[allow(clippy::too_many_arguments)]
fn transposed_extent(
    s: &Site,
    axis: &str,
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    output_padding: usize,
    dilation: usize,
) -> Result<usize> {
    let call = s.call;
    let (i, k, st, p, op, d) =
        (input as i128, kernel as i128, stride as i128, pad as i128, output_padding as i128, dilation as i128);
    let out = (i - 1) * st - 2 * p + d * (k - 1) + op + 1;
    if out < 1 {
        return Err(err(
            s.arg_tokens("padding"),
            format!(
                "{call} leaves no output {axis}: {} ({axis} {input}), and ({input} - 1)·{stride} - 2·{pad} + {dilation}·({kernel} - 1) + {output_padding} + 1 = {out}\nhint: use less padding",
                s.input.got()
            ),
        ));
    }
    if out > MAX_DIM as i128 {
        return Err(err(call, format!("{call}: the output {axis} {out} is too large (at most 2^31)")));
    }
    Ok(out as usize)
}

/// The window of a pooling layer and its output `[C, H', W']`.
struct Window {
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    out: Vec<usize>,
}

fn window(s: &Site) -> Result<Window> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let (c, h, w) = image(call, prod)?;
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or(kernel);
    let padding = b.pair("padding").unwrap_or((0, 0));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    // PyTorch rejects padding above half the kernel: a window could then see only padding.
    if padding.0 > kernel.0 / 2 || padding.1 > kernel.1 / 2 {
        return Err(err(
            s.arg_tokens("padding"),
            format!(
                "{call}: padding {} is more than half the kernel {}\nhint: padding may be at most {}",
                show_pair(padding),
                show_pair(kernel),
                show_pair((kernel.0 / 2, kernel.1 / 2))
            ),
        ));
    }
    let oh = spatial(call, prod, "height", h, kernel.0, stride.0, padding.0, dilation.0)?;
    let ow = spatial(call, prod, "width", w, kernel.1, stride.1, padding.1, dilation.1)?;
    Ok(Window { kernel, stride, padding, dilation, out: vec![c, oh, ow] })
}

pub fn max_pool2d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let Window { kernel, stride, padding, dilation, out } = window(s)?;
    Ok(s.layer(LayerKind::MaxPool2d { kernel, stride, padding, dilation }, out))
}

pub fn avg_pool2d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let Window { kernel, stride, padding, out, .. } = window(s)?;
    Ok(s.layer(LayerKind::AvgPool2d { kernel, stride, padding }, out))
}

pub fn adaptive_avg_pool2d(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b) = (s.call, s.args);
    let (c, _, _) = image(call, s.input)?;
    let (oh, ow) = match b.dims("size").unwrap_or(&[]) {
        [o] if *o > 0 => (*o as usize, *o as usize),
        [oh, ow] if *oh > 0 && *ow > 0 => (*oh as usize, *ow as usize),
        _ => {
            return Err(err(
                s.arg_tokens("size"),
                format!(
                    "{call}: the output size must be one or two positive integers\nhint: {}",
                    spec::example("AdaptiveAvgPool2d")
                ),
            ))
        }
    };
    Ok(s.layer(LayerKind::AdaptiveAvgPool2d { size: (oh, ow) }, vec![c, oh, ow]))
}

pub fn global_avg_pool(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (c, _, _) = image(s.call, s.input)?;
    Ok(s.layer(LayerKind::GlobalAvgPool, vec![c]))
}

pub fn global_max_pool(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (c, _, _) = image(s.call, s.input)?;
    Ok(s.layer(LayerKind::GlobalMaxPool, vec![c]))
}

pub fn upsample(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b) = (s.call, s.args);
    let (c, h, w) = image(call, s.input)?;
    let scale = b.pair("scale").unwrap_or((1, 1));
    let (oh, ow) = ((h as u128) * (scale.0 as u128), (w as u128) * (scale.1 as u128));
    if oh > MAX_DIM as u128 || ow > MAX_DIM as u128 {
        return Err(err(
            s.arg_tokens("scale"),
            format!("{call}: the output [{c}, {oh}, {ow}] is too large (at most 2^31 along an axis)"),
        ));
    }
    let (mode, shown) = match b.word("mode") {
        Some("bilinear") => (UpsampleMode::Bilinear, "bilinear"),
        _ => (UpsampleMode::Nearest, "nearest"),
    };
    Ok(Layer {
        display: format!("Upsample({}, mode = {shown})", show_pair(scale)),
        ..s.layer(LayerKind::Upsample { scale, mode }, vec![c, oh as usize, ow as usize])
    })
}

/// Checks an image input `[C, H, W]` and returns it.
fn image(call: &LayerCall, prod: &Producer) -> Result<(usize, usize, usize)> {
    match prod.shape.as_slice() {
        [c, h, w] => Ok((*c, *h, *w)),
        s => {
            let hint = match s {
                [n] => format!("{call} needs an image; did a `Flatten` come too early? `Reshape(c, h, w)` turns the {n} features back into an image"),
                [h, w] => format!("add a channel axis first with `Reshape(1, {h}, {w})`"),
                _ => "reshape to [channels, height, width] first".to_string(),
            };
            Err(err(
                call,
                format!("{call} expects an image [channels, height, width], but {}\nhint: {hint}", prod.got()),
            ))
        }
    }
}

/// The output length of one spatial axis; errors when the (dilated) kernel does not fit.
#[allow(clippy::too_many_arguments)]
pub(super) fn spatial(
    call: &LayerCall,
    prod: &Producer,
    axis: &str,
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
) -> Result<usize> {
    let (i, k, s, p, d) = (input as i128, kernel as i128, stride as i128, pad as i128, dilation as i128);
    let span = d * (k - 1) + 1;
    let padded = i + 2 * p;
    let numer = padded - span;
    let out = numer.div_euclid(s) + 1;
    // `numer >= 0` is exactly "output size >= 1"; otherwise the kernel overhangs the padded input.
    if numer < 0 {
        let kernel_desc = if dilation > 1 {
            format!("kernel {kernel} with dilation {dilation} spans {span}")
        } else {
            format!("kernel {kernel}")
        };
        return Err(err(
            call,
            format!(
                "{call} needs an input {axis} of at least {span} ({kernel_desc}), but {} ({axis} {input}{padded}); the output {axis} would be {out}\nhint: add padding, use a smaller kernel, or downsample less before this layer",
                prod.got(),
                padded = if pad > 0 { format!(", padded to {padded}") } else { String::new() },
            ),
        ));
    }
    Ok(out as usize)
}
