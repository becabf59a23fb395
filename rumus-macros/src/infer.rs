//! Shape inference: walks the layers from the input shape, applying each layer's rule, and
//! produces either the per-layer shapes, parameter counts and constructors, or an error spanned on
//! the offending layer or argument that names the layer, the shape it needs, the shape it got and
//! a hint.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Error;

use crate::parse::{LayerCall, Result};
use crate::spec::{self, fmt_shape, lit, pair_tokens, Bound, Shape, MAX_DIM};
use crate::suggest::did_you_mean;

/// What produced the shape a layer receives, for messages.
#[derive(Clone, Debug)]
pub struct Producer {
    /// `Flatten`, `the model input`, ...
    pub what: String,
    pub shape: Shape,
    /// For Flatten/Reshape: the shape before, shown as `(from [16, 4, 4])`.
    pub from: Option<Shape>,
    /// The shape is an input (of the model, a field or a residual block), not a layer's output.
    pub is_input: bool,
    /// The values can be token indices: an input of the model or of a custom-forward field
    /// (not a layer's output, and not a residual block's input, which is added to floats).
    pub indices: bool,
}

impl Producer {
    pub fn input(what: impl Into<String>, shape: Shape) -> Self {
        Producer { what: what.into(), shape, from: None, is_input: true, indices: true }
    }

    /// The output of a layer or nested model: features, not token indices.
    pub fn output(what: impl Into<String>, shape: Shape, from: Option<Shape>) -> Self {
        Producer { what: what.into(), shape, from, is_input: false, indices: false }
    }

    /// `Flatten produces [256] (from [16, 4, 4])` or `the model input is [1, 28, 28]`.
    pub fn got(&self) -> String {
        self.phrase(&fmt_shape(&self.shape))
    }

    /// Like [`Producer::got`] but with a bare count for rank-1 shapes: `Flatten produces 256 ...`.
    fn got_features(&self) -> String {
        match self.shape.as_slice() {
            [n] => self.phrase(&n.to_string()),
            _ => format!("{} ({} features on the last axis)", self.got(), self.shape.last().copied().unwrap_or(0)),
        }
    }

    /// `Flatten produces 256 elements (from [16, 4, 4])`, `the model input is [10] (10 elements)`.
    fn got_elements(&self) -> String {
        let n = numel(&self.shape);
        match (&self.from, self.shape.len()) {
            (Some(_), 1) => self.phrase(&format!("{n} elements")),
            _ => format!("{} ({n} elements)", self.got()),
        }
    }

    fn phrase(&self, shown: &str) -> String {
        let from = match &self.from {
            Some(f) => format!(" (from {})", fmt_shape(f)),
            None => String::new(),
        };
        let verb = if self.is_input { "is" } else { "produces" };
        format!("{} {verb} {shown}{from}", self.what)
    }
}

/// One inferred layer.
#[derive(Clone, Debug)]
pub struct LayerOut {
    pub out: Shape,
    /// Flatten and Reshape show their input in later messages.
    pub shows_from: bool,
    pub trainable: u128,
    pub buffers: u128,
    /// An expression that builds the layer; `device` and `seed` are in scope.
    pub ctor: TokenStream,
    pub type_name: &'static str,
    pub display: String,
}

/// Counts layers across a model so each gets a distinct derived seed.
#[derive(Default)]
pub struct Ctx {
    pub next_seed: u64,
}

impl Ctx {
    pub fn seed(&mut self) -> TokenStream {
        let k = self.next_seed;
        self.next_seed += 1;
        quote!(::rumus::__private::derive_seed(seed, #k))
    }
}

/// Runs a layer list from `input`, returning each layer's result.
pub fn infer_list(layers: &[LayerCall], input: Producer, ctx: &mut Ctx) -> Result<(Vec<LayerOut>, Producer)> {
    let mut prod = input;
    let mut outs = Vec::new();
    for (i, call) in layers.iter().enumerate() {
        let out = match infer_layer(call, &prod, ctx) {
            Ok(out) => out,
            Err(mut e) => {
                // The shapes after an error are unknown, but later layers' names and arguments can
                // still be checked, so one build reports all of those mistakes.
                for rest in &layers[i + 1..] {
                    if let Err(more) = check_call(rest) {
                        e.combine(more);
                    }
                }
                return Err(e);
            }
        };
        if let Some(d) = out.out.iter().find(|d| **d > MAX_DIM) {
            return Err(Error::new_spanned(
                call,
                format!("{call} would produce a dimension of {d}, more than rumus supports (2^31)"),
            ));
        }
        let from = if out.shows_from { Some(prod.shape.clone()) } else { None };
        prod = Producer::output(out.display.clone(), out.out.clone(), from);
        outs.push(out);
    }
    Ok((outs, prod))
}

/// `1 channel`, `6 channels`.
fn count(n: usize, unit: &str) -> String {
    if n == 1 {
        format!("{n} {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

fn err(tokens: impl quote::ToTokens, msg: String) -> Error {
    Error::new_spanned(tokens, msg)
}

fn numel(s: &[usize]) -> u128 {
    s.iter().fold(1u128, |acc, d| acc.saturating_mul(*d as u128))
}

fn simple(call: &LayerCall, shape: &Shape, type_name: &'static str, ctor: TokenStream) -> LayerOut {
    LayerOut {
        out: shape.clone(),
        shows_from: false,
        trainable: 0,
        buffers: 0,
        ctor,
        type_name,
        display: call.to_string(),
    }
}

/// Keras's and PyTorch's names of built-in layers that are not close in spelling.
const FOREIGN_LAYERS: &[(&str, &str)] = &[
    ("Dense", "Linear"),
    ("MaxPooling2D", "MaxPool2d"),
    ("AveragePooling2D", "AvgPool2d"),
    ("GlobalAveragePooling2D", "AdaptiveAvgPool2d"),
    ("AdaptiveAvgPool", "AdaptiveAvgPool2d"),
    ("BatchNormalization", "BatchNorm2d"),
    ("LayerNormalization", "LayerNorm"),
    ("Swish", "Silu"),
    ("Conv2D", "Conv2d"),
];

/// The table entry for `call`, or an unknown-layer error with a suggestion.
fn lookup(call: &LayerCall) -> Result<&'static spec::LayerSpec> {
    let name = call.name.to_string();
    spec::find(&name).ok_or_else(|| {
        let foreign = FOREIGN_LAYERS.iter().find(|(f, _)| *f == name).map(|(_, ours)| *ours);
        let hint =
            match foreign.or_else(|| did_you_mean(&name, spec::LAYERS.iter().map(|l| l.name))).and_then(spec::find) {
                Some(s) => format!("did you mean `{}`? ({}: {})", s.name, s.name, s.rule),
                None => {
                    let all: Vec<&str> = spec::LAYERS.iter().map(|l| l.name).collect();
                    format!("the built-in layers are {}", all.join(", "))
                }
            };
        err(&call.name, format!("unknown layer `{name}`\nhint: {hint}"))
    })
}

/// Checks what does not depend on shapes: the layer exists and its arguments bind.
pub fn check_call(call: &LayerCall) -> Result<()> {
    let b = spec::bind(lookup(call)?, call)?;
    let mut result: Result<()> = Ok(());
    for inner in b.layers() {
        if let Err(e) = check_call(inner) {
            match &mut result {
                Ok(()) => result = Err(e),
                Err(all) => all.combine(e),
            }
        }
    }
    result
}

/// Applies one layer's rule.
pub fn infer_layer(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let spec = lookup(call)?;
    let b = spec::bind(spec, call)?;
    let shape = &prod.shape;
    match spec.name {
        "Linear" => linear(call, &b, prod, ctx),
        "Conv2d" => conv2d(call, &b, prod, ctx),
        "MaxPool2d" | "AvgPool2d" => pool(call, &b, prod),
        "AdaptiveAvgPool2d" => adaptive(call, &b, prod),
        "Flatten" => Ok(LayerOut {
            out: vec![numel_checked(call, shape)?],
            shows_from: true,
            ..simple(call, shape, "Flatten", quote!(::rumus::nn::Flatten::new()))
        }),
        "Reshape" => reshape(call, &b, prod),
        "Dropout" => {
            let p = b.float("p", 0.5) as f32;
            let seed = ctx.seed();
            Ok(simple(call, shape, "Dropout", quote!(::rumus::nn::Dropout::new(#p, #seed))))
        }
        "BatchNorm1d" | "BatchNorm2d" => batch_norm(call, &b, prod),
        "LayerNorm" => layer_norm(call, &b, prod),
        "Embedding" => embedding(call, &b, prod, ctx),
        "Relu" => Ok(simple(call, shape, "Relu", quote!(::rumus::nn::Relu))),
        "Sigmoid" => Ok(simple(call, shape, "Sigmoid", quote!(::rumus::nn::Sigmoid))),
        "Tanh" => Ok(simple(call, shape, "Tanh", quote!(::rumus::nn::Tanh))),
        "Gelu" => Ok(simple(call, shape, "Gelu", quote!(::rumus::nn::Gelu))),
        "GeluTanh" => Ok(simple(call, shape, "GeluTanh", quote!(::rumus::nn::GeluTanh))),
        "Silu" => Ok(simple(call, shape, "Silu", quote!(::rumus::nn::Silu))),
        "LeakyRelu" => {
            let s = b.float("slope", 0.01) as f32;
            Ok(simple(call, shape, "LeakyRelu", quote!(::rumus::nn::LeakyRelu { negative_slope: #s })))
        }
        "Softmax" | "LogSoftmax" => softmax(call, &b, prod, spec.name),
        "Residual" => residual(call, &b, prod, ctx),
        "MultiHeadAttention" => attention(call, &b, prod, ctx),
        // The table and this match are kept in step by the `every_layer_has_a_rule` test.
        other => Err(err(call, format!("layer `{other}` has no shape rule (bug in rumus-macros)"))),
    }
}

fn numel_checked(call: &LayerCall, shape: &[usize]) -> Result<usize> {
    let n = numel(shape);
    if n > MAX_DIM as u128 {
        return Err(err(
            call,
            format!("{call} would produce {n} features from {}, more than rumus supports (2^31)", fmt_shape(shape)),
        ));
    }
    Ok(n as usize)
}

fn linear(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let shape = &prod.shape;
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
        if want != got_in {
            // `[28, 28]` into `Linear(784 => ..)`: the user meant to flatten, not to map rows.
            let hint = if shape.len() == 2 && numel(shape) == want as u128 {
                format!(
                    "Linear acts on the last axis ({got_in} features per row of {}); insert `Flatten` before {call} to get [{want}]",
                    fmt_shape(shape)
                )
            } else {
                format!("write `Linear({out})` to infer the input features, or `Linear({got_in} => {out})`")
            };
            return Err(err(
                call,
                format!("{call} expects {want} input features, but {}\nhint: {hint}", prod.got_features()),
            ));
        }
    }
    let bias = b.bool("bias", true);
    let mut out_shape = shape.clone();
    let last = out_shape.len() - 1;
    out_shape[last] = out;
    let (i, o, seed) = (lit(got_in), lit(out), ctx.seed());
    Ok(LayerOut {
        out: out_shape,
        shows_from: false,
        trainable: (got_in as u128) * (out as u128) + if bias { out as u128 } else { 0 },
        buffers: 0,
        ctor: quote!(::rumus::nn::Linear::new(device, #i, #o, #bias, #seed)?),
        type_name: "Linear",
        display: if bias {
            format!("Linear({got_in} => {out})")
        } else {
            format!("Linear({got_in} => {out}, bias = false)")
        },
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
fn spatial(
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

fn conv2d(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let (c, h, w) = image(call, prod)?;
    let Some((want_in, out)) = b.features() else {
        return Err(err(call, format!("Conv2d needs its output channels\nhint: {}", spec::example("Conv2d"))));
    };
    if let Some(want) = want_in {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {want} input channels, but {} ({})\nhint: write `Conv2d({out}, ...)` to infer the input channels",
                    prod.got(),
                    count(c, "channel")
                ),
            ));
        }
    }
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or((1, 1));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    let groups = b.usize("groups").unwrap_or(1);
    let bias = b.bool("bias", true);
    let groups_tokens = b.tokens_or("groups", &call.tokens);
    if c % groups != 0 {
        return Err(err(
            groups_tokens,
            format!("{call} needs input channels divisible by groups = {groups}, but {} ({})\nhint: choose groups dividing {c}", prod.got(), count(c, "channel")),
        ));
    }
    if out % groups != 0 {
        return Err(err(
            groups_tokens,
            format!("{call} needs output channels divisible by groups = {groups}, but it has {out} output channels\nhint: choose groups dividing both {c} and {out}"),
        ));
    }
    let padding = if b.is_same("padding") {
        let pad_tokens = b.tokens_or("padding", &call.tokens);
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
        (total.0 / 2, total.1 / 2)
    } else {
        b.pair("padding").unwrap_or((0, 0))
    };
    let oh = spatial(call, prod, "height", h, kernel.0, stride.0, padding.0, dilation.0)?;
    let ow = spatial(call, prod, "width", w, kernel.1, stride.1, padding.1, dilation.1)?;
    let weights = (out as u128) * ((c / groups) as u128) * (kernel.0 as u128) * (kernel.1 as u128);
    let (ci, co, g, seed) = (lit(c), lit(out), lit(groups), ctx.seed());
    let (kt, st, pt, dt) = (pair_tokens(kernel), pair_tokens(stride), pair_tokens(padding), pair_tokens(dilation));
    let mut display = format!("Conv2d({c} => {out}, kernel = {}", show_pair(kernel));
    for (name, v, default) in [("stride", stride, (1, 1)), ("padding", padding, (0, 0)), ("dilation", dilation, (1, 1))]
    {
        if v != default {
            display.push_str(&format!(", {name} = {}", show_pair(v)));
        }
    }
    if groups != 1 {
        display.push_str(&format!(", groups = {groups}"));
    }
    if !bias {
        display.push_str(", bias = false");
    }
    display.push(')');
    Ok(LayerOut {
        out: vec![out, oh, ow],
        shows_from: false,
        trainable: weights + if bias { out as u128 } else { 0 },
        buffers: 0,
        ctor: quote!(::rumus::nn::Conv2d::new(
            device,
            ::rumus::nn::Conv2dConfig {
                in_channels: #ci,
                out_channels: #co,
                kernel: #kt,
                stride: #st,
                padding: #pt,
                dilation: #dt,
                groups: #g,
                bias: #bias,
            },
            #seed,
        )?),
        type_name: "Conv2d",
        display,
    })
}

fn show_pair((a, b): (usize, usize)) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("({a}, {b})")
    }
}

fn pool(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let (c, h, w) = image(call, prod)?;
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or(kernel);
    let padding = b.pair("padding").unwrap_or((0, 0));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    // PyTorch rejects padding above half the kernel: a window could then see only padding.
    if padding.0 > kernel.0 / 2 || padding.1 > kernel.1 / 2 {
        return Err(err(
            b.tokens_or("padding", &call.tokens),
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
    let (kt, st, pt, dt) = (pair_tokens(kernel), pair_tokens(stride), pair_tokens(padding), pair_tokens(dilation));
    let (ctor, type_name) = if call.name == "MaxPool2d" {
        (quote!(::rumus::nn::MaxPool2d::new(#kt, #st, #pt, #dt)), "MaxPool2d")
    } else {
        (quote!(::rumus::nn::AvgPool2d::new(#kt, #st, #pt)), "AvgPool2d")
    };
    Ok(LayerOut { out: vec![c, oh, ow], ..simple(call, &prod.shape, type_name, ctor) })
}

fn adaptive(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let (c, _, _) = image(call, prod)?;
    let size_tokens = b.tokens_or("size", &call.tokens);
    let (oh, ow) = match b.dims("size").unwrap_or(&[]) {
        [o] if *o > 0 => (*o as usize, *o as usize),
        [oh, ow] if *oh > 0 && *ow > 0 => (*oh as usize, *ow as usize),
        _ => {
            return Err(err(
                size_tokens,
                format!(
                    "{call}: the output size must be one or two positive integers\nhint: {}",
                    spec::example("AdaptiveAvgPool2d")
                ),
            ))
        }
    };
    let size = pair_tokens((oh, ow));
    Ok(LayerOut {
        out: vec![c, oh, ow],
        ..simple(call, &prod.shape, "AdaptiveAvgPool2d", quote!(::rumus::nn::AdaptiveAvgPool2d::new(#size)))
    })
}

fn reshape(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let dims = b.dims("shape").unwrap_or(&[]);
    let have = numel(&prod.shape);
    if dims.iter().filter(|d| **d == -1).count() > 1 || dims.contains(&0) || dims.is_empty() {
        return Err(err(
            call,
            format!("{call}: the target shape must be positive sizes, with at most one -1 to infer"),
        ));
    }
    let known: u128 = dims.iter().filter(|d| **d > 0).fold(1u128, |a, d| a.saturating_mul(*d as u128));
    let infer_ok = known != 0 && have.is_multiple_of(known);
    let out: Shape = if dims.contains(&-1) {
        if !infer_ok {
            return Err(err(
                call,
                format!(
                    "{call} needs a multiple of {known} elements, but {}\nhint: the known sizes must divide {have}",
                    prod.got_elements()
                ),
            ));
        }
        dims.iter().map(|d| if *d == -1 { (have / known) as usize } else { *d as usize }).collect()
    } else {
        dims.iter().map(|d| *d as usize).collect()
    };
    let want = numel(&out);
    if want != have {
        return Err(err(
            call,
            format!(
                "{call} needs {want} elements, but {}\nhint: the target shape must hold exactly {have} elements",
                prod.got_elements()
            ),
        ));
    }
    let lits = out.iter().map(|d| lit(*d));
    let display = format!("Reshape{}", fmt_shape(&out).replace('[', "(").replace(']', ")"));
    Ok(LayerOut {
        out: out.clone(),
        shows_from: true,
        display,
        ..simple(call, &prod.shape, "Reshape", quote!(::rumus::nn::Reshape::new(&[#(#lits),*])))
    })
}

fn batch_norm(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let two_d = call.name == "BatchNorm2d";
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
    let eps = b.float("eps", 1e-5) as f32;
    let momentum = b.float("momentum", 0.1) as f32;
    let (cl, type_name) = (lit(c), if two_d { "BatchNorm2d" } else { "BatchNorm1d" });
    let ctor = if two_d {
        quote!(::rumus::nn::BatchNorm2d::new(device, #cl, #eps, #momentum)?)
    } else {
        quote!(::rumus::nn::BatchNorm1d::new(device, #cl, #eps, #momentum)?)
    };
    Ok(LayerOut {
        trainable: 2 * c as u128,
        buffers: 2 * c as u128,
        display: format!("{type_name}({c})"),
        ..simple(call, shape, type_name, ctor)
    })
}

fn layer_norm(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let shape = &prod.shape;
    let norm: Shape = match b.dims("shape") {
        None => shape.last().map(|d| vec![*d]).unwrap_or_default(),
        Some(d) if d.iter().all(|x| *x > 0) => d.iter().map(|x| *x as usize).collect(),
        Some(_) => {
            return Err(err(
                b.tokens_or("shape", &call.tokens),
                format!("{call}: the normalized shape must be positive sizes"),
            ));
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
    let lits = norm.iter().map(|d| lit(*d));
    Ok(LayerOut {
        trainable: if affine { 2 * n } else { 0 },
        display: format!("LayerNorm{}", fmt_shape(&norm).replace('[', "(").replace(']', ")")),
        ..simple(call, shape, "LayerNorm", quote!(::rumus::nn::LayerNorm::new(device, &[#(#lits),*], #eps, #affine)?))
    })
}

fn embedding(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
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
    let (n, d, seed) = (lit(num), lit(dim), ctx.seed());
    Ok(LayerOut {
        out: vec![*t, dim],
        trainable: (num as u128) * (dim as u128),
        display: format!("Embedding({num}, {dim})"),
        ..simple(call, &prod.shape, "Embedding", quote!(::rumus::nn::Embedding::new(device, #n, #d, #seed)?))
    })
}

fn softmax(call: &LayerCall, b: &Bound, prod: &Producer, name: &'static str) -> Result<LayerOut> {
    let rank = prod.shape.len() as i64;
    let axis = b.int("axis", -1);
    if axis >= rank || axis < -rank {
        return Err(err(
            b.tokens_or("axis", &call.tokens),
            format!("{call}: axis {axis} is out of range, because {} (rank {rank}; the batch axis is not counted)\nhint: use an axis in {}..{rank}", prod.got(), -rank),
        ));
    }
    let a = axis as isize;
    let ctor = if name == "Softmax" {
        quote!(::rumus::nn::Softmax { axis: #a })
    } else {
        quote!(::rumus::nn::LogSoftmax { axis: #a })
    };
    Ok(simple(call, &prod.shape, name, ctor))
}

fn residual(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
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
    let (outs, mut last) = infer_list(inner, input, ctx)?;
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
    let ctors = outs.iter().map(|o| &o.ctor);
    let names: Vec<String> = outs.iter().map(|o| o.display.clone()).collect();
    Ok(LayerOut {
        trainable: outs.iter().fold(0u128, |a, o| a.saturating_add(o.trainable)),
        buffers: outs.iter().fold(0u128, |a, o| a.saturating_add(o.buffers)),
        display: format!("Residual({})", names.join(", ")),
        ..simple(
            call,
            &prod.shape,
            "Residual",
            quote!(::rumus::nn::Residual::new(::rumus::nn::Sequential::new() #(.with(#ctors))*)),
        )
    })
}

fn attention(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let heads = b.usize("heads").unwrap_or(1);
    let [_, e] = prod.shape.as_slice() else {
        return Err(err(
            call,
            format!("{call} expects a sequence [T, E], but {}\nhint: attention runs over sequences, e.g. after `Embedding(vocab, 64)`", prod.got()),
        ));
    };
    if e % heads != 0 {
        return Err(err(
            b.tokens_or("heads", &call.tokens),
            format!("{call} needs the embedding size to be divisible by heads = {heads}, but {} (E = {e})\nhint: choose heads dividing {e}", prod.got()),
        ));
    }
    let e128 = *e as u128;
    let (el, hl, seed) = (lit(*e), lit(heads), ctx.seed());
    Ok(LayerOut {
        // PyTorch layout: in_proj [3E, E] + [3E], out_proj [E, E] + [E].
        trainable: 4 * e128 * e128 + 4 * e128,
        display: format!("MultiHeadAttention({heads}, E = {e})"),
        ..simple(
            call,
            &prod.shape,
            "MultiHeadAttention",
            quote!(::rumus::nn::MultiHeadAttention::new(device, #el, #hl, #seed)?),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_layer_list;

    fn run(src: &str, input: &[usize]) -> Result<(Vec<LayerOut>, Producer)> {
        let layers = parse_layer_list(src.parse().unwrap())?;
        infer_list(&layers, Producer::input("the model input", input.to_vec()), &mut Ctx::default())
    }

    fn shapes(src: &str, input: &[usize]) -> Vec<Shape> {
        run(src, input).unwrap().0.into_iter().map(|o| o.out).collect()
    }

    fn message(src: &str, input: &[usize]) -> String {
        run(src, input).expect_err("expected an error").to_string()
    }

    #[test]
    fn lenet_shapes_and_params() {
        let (outs, _) = run(
            "Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2), Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)",
            &[1, 28, 28],
        )
        .unwrap();
        let s: Vec<Shape> = outs.iter().map(|o| o.out.clone()).collect();
        assert_eq!(s[0], vec![6, 28, 28]);
        assert_eq!(s[2], vec![6, 14, 14]);
        assert_eq!(s[3], vec![16, 10, 10]);
        assert_eq!(s[5], vec![16, 5, 5]);
        assert_eq!(s[6], vec![400]);
        assert_eq!(s[11], vec![10]);
        assert_eq!(outs.iter().map(|o| o.trainable).sum::<u128>(), 61_706);
    }

    #[test]
    fn conv_arithmetic_matches_pytorch() {
        // torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, dilation=2)(torch.zeros(1, 3, 32, 31)).shape == [1, 8, 15, 15]
        assert_eq!(
            shapes("Conv2d(8, kernel = 3, stride = 2, padding = 1, dilation = 2)", &[3, 32, 31]),
            [vec![8, 15, 15]]
        );
        assert_eq!(shapes("Conv2d(8, kernel = (3, 5), padding = same)", &[3, 9, 9]), [vec![8, 9, 9]]);
        assert_eq!(shapes("MaxPool2d(3, stride = 2, padding = 1)", &[4, 7, 8]), [vec![4, 4, 4]]);
        assert_eq!(shapes("AdaptiveAvgPool2d(1)", &[4, 7, 8]), [vec![4, 1, 1]]);
        assert_eq!(shapes("Reshape(-1, 4)", &[2, 8]), [vec![4, 4]]);
        assert_eq!(
            shapes("Embedding(100, 16), MultiHeadAttention(4), LayerNorm", &[12]).last().unwrap(),
            &vec![12, 16]
        );
    }

    #[test]
    fn the_issue_example_message() {
        let m = message("Conv2d(16, kernel = 5), MaxPool2d(2), Flatten, Linear(400 => 120)", &[1, 12, 12]);
        assert!(
            m.starts_with("Linear(400 => 120) expects 400 input features, but Flatten produces 256 (from [16, 4, 4])"),
            "{m}"
        );
    }

    #[test]
    fn embedding_reads_indices_only_from_an_input() {
        assert!(message("Residual(Embedding(10, 1), Flatten)", &[16]).contains("cannot be inside Residual"));
        // Deeper inside, the inner Residual reports it.
        assert!(message("Residual(Linear(16), Residual(Embedding(10, 1), Flatten))", &[16])
            .contains("Embedding(10, 1) cannot be inside Residual"));
        assert!(message("Dropout(0.1), Embedding(10, 4)", &[16]).contains("which are not indices"));
        let m = message("Embedding(10, 4)", &[1, 28, 28]);
        assert!(m.contains("an image, not token indices") && !m.contains("declare the input"), "{m}");
        assert_eq!(shapes("Embedding(10, 4)", &[16]), [vec![16, 4]]);
    }

    #[test]
    fn linear_on_rows_whose_count_matches_after_flattening_hints_flatten() {
        let m = message("Linear(784 => 128)", &[28, 28]);
        assert!(m.contains("insert `Flatten` before Linear(784 => 128) to get [784]"), "{m}");
        // A genuine [T, in] mismatch keeps the in-features hint.
        let m = message("Linear(30 => 128)", &[28, 28]);
        assert!(m.contains("`Linear(28 => 128)`"), "{m}");
    }

    #[test]
    fn every_layer_has_a_rule() {
        for l in spec::LAYERS {
            let call = parse_layer_list(l.name.parse().unwrap()).unwrap();
            if let Err(e) = infer_list(&call, Producer::input("x", vec![4, 8, 8]), &mut Ctx::default()) {
                assert!(!e.to_string().contains("bug in rumus-macros"), "{}", l.name);
            }
        }
    }
}
