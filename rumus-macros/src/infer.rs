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
    /// An `Embedding`'s weight shape `[num, dim]`, which a `Linear(.., tie = ..)` may share.
    pub embedding: Option<(usize, usize)>,
    /// A tied `Linear`'s `field.index`: its weight is counted there.
    pub tied_to: Option<String>,
}

/// Most layers one model may expand to (after `Repeat`), so that no input makes the expansion
/// run away.
pub const MAX_LAYERS: usize = 4096;

/// A layer directly in a field's list (after `Repeat` expansion): what `tie = field.index` can
/// name.
#[derive(Clone, Debug)]
pub struct TopLayer {
    pub field: String,
    pub index: usize,
    pub display: String,
    pub embedding: Option<(usize, usize)>,
}

/// State shared by every layer of one model: derived seeds, the layers `tie` can name, and the
/// count of attention layers (the `depth` of their residual-projection init).
#[derive(Default)]
pub struct Ctx {
    pub next_seed: u64,
    /// The field being inferred.
    pub field: String,
    /// Every field of the model in order, with whether it is a `layers![..]` list.
    pub fields: Vec<(String, bool)>,
    /// Nesting inside `Residual` (0: directly in a field's list).
    nesting: usize,
    /// The layers inferred so far directly in a field's list.
    pub top: Vec<TopLayer>,
    /// The `(field, index)` of every Embedding a Linear ties to.
    pub tied: Vec<(String, usize)>,
    /// `CausalSelfAttention` and `TransformerBlock` layers (Repeat copies included).
    pub attention_layers: usize,
    /// Layers inferred so far, nested ones and Repeat copies included.
    layer_count: usize,
}

impl Ctx {
    /// The context of a model with `fields` (name, whether it is a `layers![..]` list).
    pub fn new(fields: Vec<(String, bool)>) -> Self {
        Ctx { fields, ..Ctx::default() }
    }

    pub fn seed(&mut self) -> TokenStream {
        let k = self.next_seed;
        self.next_seed += 1;
        quote!(::rumus::__private::derive_seed(seed, #k))
    }
}

/// The name of the variable that holds the weight of the tie source `field.index` in `new`.
pub fn tie_var(field: &str, index: usize) -> proc_macro2::Ident {
    quote::format_ident!("__rumus_tie_{}_{}", field.trim_start_matches("r#"), index)
}

/// The variable, bound in the generated `new`, that holds the number of attention layers.
pub fn depth_var() -> proc_macro2::Ident {
    quote::format_ident!("__rumus_attention_layers")
}

/// Runs a layer list from `input`, returning each layer's result (a `Repeat` gives one result per
/// layer of each copy).
pub fn infer_list(layers: &[LayerCall], input: Producer, ctx: &mut Ctx) -> Result<(Vec<LayerOut>, Producer)> {
    let mut prod = input;
    let mut outs = Vec::new();
    for (i, call) in layers.iter().enumerate() {
        let step = if call.name == "Repeat" { repeat(call, &prod, ctx) } else { infer_one(call, &prod, ctx) };
        match step {
            Ok((more, next)) => {
                outs.extend(more);
                prod = next;
            }
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
        }
    }
    Ok((outs, prod))
}

/// One layer other than `Repeat`: its result and the producer of the next layer's input.
fn infer_one(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<(Vec<LayerOut>, Producer)> {
    ctx.layer_count += 1;
    if ctx.layer_count > MAX_LAYERS {
        return Err(err(
            call,
            format!("the model expands to more than {MAX_LAYERS} layers at {call}, more than #[model] builds\nhint: use fewer `Repeat` copies"),
        ));
    }
    let out = infer_layer(call, prod, ctx)?;
    if let Some(d) = out.out.iter().find(|d| **d > MAX_DIM) {
        return Err(Error::new_spanned(
            call,
            format!("{call} would produce a dimension of {d}, more than rumus supports (2^31)"),
        ));
    }
    if ctx.nesting == 0 {
        let index = ctx.top.iter().filter(|t| t.field == ctx.field).count();
        ctx.top.push(TopLayer {
            field: ctx.field.clone(),
            index,
            display: out.display.clone(),
            embedding: out.embedding,
        });
    }
    let from = if out.shows_from { Some(prod.shape.clone()) } else { None };
    let next = Producer::output(out.display.clone(), out.out.clone(), from);
    Ok((vec![out], next))
}

/// `Repeat(n, layers..)`: the layers inferred `n` times in a row, each copy from the previous
/// copy's output, as if written out `n` times.
fn repeat(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<(Vec<LayerOut>, Producer)> {
    let b = spec::bind(lookup(call)?, call)?;
    let n = b.usize("n").unwrap_or(1);
    if n > MAX_LAYERS {
        return Err(err(
            b.tokens_or("n", &call.tokens),
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
        embedding: None,
        tied_to: None,
    }
}

/// Keras's and PyTorch's names of built-in layers that are not close in spelling.
const FOREIGN_LAYERS: &[(&str, &str)] = &[
    ("Dense", "Linear"),
    ("MaxPooling2D", "MaxPool2d"),
    ("AveragePooling2D", "AvgPool2d"),
    ("GlobalAveragePooling2D", "GlobalAvgPool"),
    ("GlobalMaxPooling2D", "GlobalMaxPool"),
    ("AdaptiveMaxPool2d", "GlobalMaxPool"),
    ("Conv2DTranspose", "ConvTranspose2d"),
    ("Conv1D", "Conv1d"),
    ("MaxPooling1D", "MaxPool1d"),
    ("AveragePooling1D", "AvgPool1d"),
    ("UpSampling2D", "Upsample"),
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

/// Applies one layer's rule (`Repeat` is expanded by [`infer_list`]).
fn infer_layer(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let spec = lookup(call)?;
    let b = spec::bind(spec, call)?;
    let shape = &prod.shape;
    match spec.name {
        "Linear" => linear(call, &b, prod, ctx),
        "Conv2d" => conv2d(call, &b, prod, ctx),
        "MaxPool2d" | "AvgPool2d" => pool(call, &b, prod),
        "AdaptiveAvgPool2d" => adaptive(call, &b, prod),
        "ConvTranspose2d" => conv_transpose2d(call, &b, prod, ctx),
        "Conv1d" => conv1d(call, &b, prod, ctx),
        "MaxPool1d" | "AvgPool1d" => pool1d(call, &b, prod),
        "GlobalAvgPool" | "GlobalMaxPool" => global_pool(call, prod),
        "Upsample" => upsample(call, &b, prod),
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
        "MultiHeadAttention" | "CausalSelfAttention" | "TransformerBlock" => attention(call, &b, prod, ctx),
        "PositionalEmbedding" => positional_embedding(call, &b, prod, ctx),
        // `infer_list` expands Repeat in place (one result per copied layer), so it never gets here.
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
    let tie = match b.layer_ref("tie") {
        Some((field, index)) => Some(resolve_tie(call, b, ctx, (field, index), (out, got_in))?),
        None => None,
    };
    let mut out_shape = shape.clone();
    let last = out_shape.len() - 1;
    out_shape[last] = out;
    let (i, o, seed) = (lit(got_in), lit(out), ctx.seed());
    let weight = if tie.is_some() { 0 } else { (got_in as u128) * (out as u128) };
    let mut display = format!("Linear({got_in} => {out}");
    if !bias {
        display.push_str(", bias = false");
    }
    let ctor = match &tie {
        // The weight is the Embedding's parameter itself (one storage), bound earlier in `new`.
        Some((field, index)) => {
            display.push_str(&format!(", tie = {field}.{index}"));
            let var = tie_var(field, *index);
            quote!({
                let mut layer = ::rumus::nn::Linear::new(device, #i, #o, #bias, #seed)?;
                layer.weight = ::core::clone::Clone::clone(&#var);
                layer
            })
        }
        None => quote!(::rumus::nn::Linear::new(device, #i, #o, #bias, #seed)?),
    };
    display.push(')');
    Ok(LayerOut {
        out: out_shape,
        shows_from: false,
        trainable: weight + if bias { out as u128 } else { 0 },
        buffers: 0,
        ctor,
        type_name: "Linear",
        display,
        embedding: None,
        tied_to: tie.map(|(field, index)| format!("{field}.{index}")),
    })
}

/// Checks `tie = field.index` of a Linear whose weight is `[out, in]`: it names an Embedding that
/// comes earlier in the model, with weight `[num, dim] == [out, in]`. Records the tie.
fn resolve_tie(
    call: &LayerCall,
    b: &Bound,
    ctx: &mut Ctx,
    (field, index): (&str, usize),
    (out, inp): (usize, usize),
) -> Result<(String, usize)> {
    let at = b.tokens_or("tie", &call.tokens);
    let written = format!("tie = {field}.{index}");
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
    let Some(target) = ctx.top.iter().find(|t| t.field == field && t.index == index).cloned() else {
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
        return Err(err(
            at,
            format!(
                "`{written}`: {detail}\nhint: indices count every layer of the list, each copy of a `Repeat` included"
            ),
        ));
    };
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
    let key = (field.to_string(), index);
    if !ctx.tied.contains(&key) {
        ctx.tied.push(key.clone());
    }
    Ok(key)
}

/// `1 layer`, `3 layers`.
fn count_layers(n: usize) -> String {
    count(n, "layer")
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
        embedding: None,
        tied_to: None,
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

/// The input channels a convolution-like layer receives; errors when `in => out` disagrees.
fn checked_in_channels(call: &LayerCall, b: &Bound, prod: &Producer, c: usize) -> Result<usize> {
    let name = call.name.to_string();
    let Some((want_in, out)) = b.features() else {
        return Err(err(call, format!("{name} needs its output channels\nhint: {}", spec::example(&name))));
    };
    if let Some(want) = want_in {
        if want != c {
            return Err(err(
                call,
                format!(
                    "{call} expects {want} input channels, but {} ({})\nhint: write `{name}({out}, ...)` to infer the input channels",
                    prod.got(),
                    count(c, "channel")
                ),
            ));
        }
    }
    Ok(out)
}

/// Input and output channels both divisible by `groups`, or a spanned error.
fn check_groups(call: &LayerCall, b: &Bound, prod: &Producer, c: usize, out: usize, groups: usize) -> Result<()> {
    let groups_tokens = b.tokens_or("groups", &call.tokens);
    if !c.is_multiple_of(groups) {
        return Err(err(
            groups_tokens,
            format!("{call} needs input channels divisible by groups = {groups}, but {} ({})\nhint: choose groups dividing {c}", prod.got(), count(c, "channel")),
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

/// The output length of a transposed convolution along one axis, or a spanned error.
#[allow(clippy::too_many_arguments)]
fn transposed_extent(
    call: &LayerCall,
    b: &Bound,
    prod: &Producer,
    axis: &str,
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    output_padding: usize,
    dilation: usize,
) -> Result<usize> {
    let (i, k, s, p, op, d) =
        (input as i128, kernel as i128, stride as i128, pad as i128, output_padding as i128, dilation as i128);
    let out = (i - 1) * s - 2 * p + d * (k - 1) + op + 1;
    if out < 1 {
        return Err(err(
            b.tokens_or("padding", &call.tokens),
            format!(
                "{call} leaves no output {axis}: {} ({axis} {input}), and ({input} - 1)·{stride} - 2·{pad} + {dilation}·({kernel} - 1) + {output_padding} + 1 = {out}\nhint: use less padding",
                prod.got()
            ),
        ));
    }
    if out > MAX_DIM as i128 {
        return Err(err(call, format!("{call}: the output {axis} {out} is too large (at most 2^31)")));
    }
    Ok(out as usize)
}

fn conv_transpose2d(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let (c, h, w) = image(call, prod)?;
    let out = checked_in_channels(call, b, prod, c)?;
    let kernel = b.pair("kernel").unwrap_or((1, 1));
    let stride = b.pair("stride").unwrap_or((1, 1));
    let padding = b.pair("padding").unwrap_or((0, 0));
    let output_padding = b.pair("output_padding").unwrap_or((0, 0));
    let dilation = b.pair("dilation").unwrap_or((1, 1));
    let groups = b.usize("groups").unwrap_or(1);
    let bias = b.bool("bias", true);
    check_groups(call, b, prod, c, out, groups)?;
    if output_padding.0 >= stride.0 || output_padding.1 >= stride.1 {
        return Err(err(
            b.tokens_or("output_padding", &call.tokens),
            format!(
                "{call}: output_padding {} must be smaller than the stride {}\nhint: output_padding picks one of the `stride` output sizes that downsampling by the stride maps to the same input size",
                show_pair(output_padding),
                show_pair(stride)
            ),
        ));
    }
    let oh =
        transposed_extent(call, b, prod, "height", h, kernel.0, stride.0, padding.0, output_padding.0, dilation.0)?;
    let ow = transposed_extent(call, b, prod, "width", w, kernel.1, stride.1, padding.1, output_padding.1, dilation.1)?;
    let weights = (c as u128) * ((out / groups) as u128) * (kernel.0 as u128) * (kernel.1 as u128);
    let (ci, co, g, seed) = (lit(c), lit(out), lit(groups), ctx.seed());
    let (kt, st, pt, opt, dt) = (
        pair_tokens(kernel),
        pair_tokens(stride),
        pair_tokens(padding),
        pair_tokens(output_padding),
        pair_tokens(dilation),
    );
    let mut display = format!("ConvTranspose2d({c} => {out}, kernel = {}", show_pair(kernel));
    for (name, v, default) in [
        ("stride", stride, (1, 1)),
        ("padding", padding, (0, 0)),
        ("output_padding", output_padding, (0, 0)),
        ("dilation", dilation, (1, 1)),
    ] {
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
        ctor: quote!(::rumus::nn::ConvTranspose2d::new(
            device,
            ::rumus::nn::ConvTranspose2dConfig {
                in_channels: #ci,
                out_channels: #co,
                kernel: #kt,
                stride: #st,
                padding: #pt,
                output_padding: #opt,
                dilation: #dt,
                groups: #g,
                bias: #bias,
            },
            #seed,
        )?),
        type_name: "ConvTranspose2d",
        display,
        embedding: None,
        tied_to: None,
    })
}

/// Checks a sequence input `[C, L]` and returns it.
fn channels_length(call: &LayerCall, prod: &Producer) -> Result<(usize, usize)> {
    match prod.shape.as_slice() {
        [c, l] => Ok((*c, *l)),
        s => {
            let hint = match s {
                [n] => format!("add a channel axis first with `Reshape(1, {n})`"),
                [c, h, w] => format!("{call} is one-dimensional; for an image use its 2-D form, or `Reshape({c}, {})` to treat the rows as one sequence", (*h as u128) * (*w as u128)),
                _ => "reshape to [channels, length] first".to_string(),
            };
            Err(err(call, format!("{call} expects a sequence [channels, length], but {}\nhint: {hint}", prod.got())))
        }
    }
}

fn conv1d(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let (c, l) = channels_length(call, prod)?;
    let out = checked_in_channels(call, b, prod, c)?;
    let kernel = b.usize("kernel").unwrap_or(1);
    let stride = b.usize("stride").unwrap_or(1);
    let dilation = b.usize("dilation").unwrap_or(1);
    let groups = b.usize("groups").unwrap_or(1);
    let bias = b.bool("bias", true);
    check_groups(call, b, prod, c, out, groups)?;
    let same = b.is_same("padding");
    let (ol, padding_tokens, padding_text) = if same {
        if stride != 1 {
            return Err(err(
                b.tokens_or("padding", &call.tokens),
                format!("{call}: `padding = same` needs stride 1, but the stride is {stride}\nhint: give the padding as a number"),
            ));
        }
        // PyTorch pads d·(k-1) in all, the odd one on the right: any kernel keeps the length.
        (l, quote!(::rumus::Conv1dPadding::Same), ", padding = same".to_string())
    } else {
        let p = b.usize("padding").unwrap_or(0);
        let ol = spatial(call, prod, "length", l, kernel, stride, p, dilation)?;
        let text = if p == 0 { String::new() } else { format!(", padding = {p}") };
        let pl = lit(p);
        (ol, quote!(::rumus::Conv1dPadding::Explicit(#pl)), text)
    };
    let weights = (out as u128) * ((c / groups) as u128) * (kernel as u128);
    let (ci, co, k, s, d, g, seed) =
        (lit(c), lit(out), lit(kernel), lit(stride), lit(dilation), lit(groups), ctx.seed());
    let mut display = format!("Conv1d({c} => {out}, kernel = {kernel}");
    if stride != 1 {
        display.push_str(&format!(", stride = {stride}"));
    }
    display.push_str(&padding_text);
    if dilation != 1 {
        display.push_str(&format!(", dilation = {dilation}"));
    }
    if groups != 1 {
        display.push_str(&format!(", groups = {groups}"));
    }
    if !bias {
        display.push_str(", bias = false");
    }
    display.push(')');
    Ok(LayerOut {
        out: vec![out, ol],
        shows_from: false,
        trainable: weights + if bias { out as u128 } else { 0 },
        buffers: 0,
        ctor: quote!(::rumus::nn::Conv1d::new(
            device,
            ::rumus::nn::Conv1dConfig {
                in_channels: #ci,
                out_channels: #co,
                kernel: #k,
                stride: #s,
                padding: #padding_tokens,
                dilation: #d,
                groups: #g,
                bias: #bias,
            },
            #seed,
        )?),
        type_name: "Conv1d",
        display,
        embedding: None,
        tied_to: None,
    })
}

fn pool1d(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let (c, l) = channels_length(call, prod)?;
    let kernel = b.usize("kernel").unwrap_or(1);
    let stride = b.usize("stride").unwrap_or(kernel);
    let padding = b.usize("padding").unwrap_or(0);
    let dilation = b.usize("dilation").unwrap_or(1);
    if padding > kernel / 2 {
        return Err(err(
            b.tokens_or("padding", &call.tokens),
            format!(
                "{call}: padding {padding} is more than half the kernel {kernel}\nhint: padding may be at most {}",
                kernel / 2
            ),
        ));
    }
    let ol = spatial(call, prod, "length", l, kernel, stride, padding, dilation)?;
    let (k, s, p, d) = (lit(kernel), lit(stride), lit(padding), lit(dilation));
    let (ctor, type_name) = if call.name == "MaxPool1d" {
        (quote!(::rumus::nn::MaxPool1d::new(#k, #s, #p, #d)), "MaxPool1d")
    } else {
        (quote!(::rumus::nn::AvgPool1d::new(#k, #s, #p)), "AvgPool1d")
    };
    Ok(LayerOut { out: vec![c, ol], ..simple(call, &prod.shape, type_name, ctor) })
}

fn global_pool(call: &LayerCall, prod: &Producer) -> Result<LayerOut> {
    let (c, _, _) = image(call, prod)?;
    let (ctor, type_name) = if call.name == "GlobalAvgPool" {
        (quote!(::rumus::nn::GlobalAvgPool), "GlobalAvgPool")
    } else {
        (quote!(::rumus::nn::GlobalMaxPool), "GlobalMaxPool")
    };
    Ok(LayerOut { out: vec![c], ..simple(call, &prod.shape, type_name, ctor) })
}

fn upsample(call: &LayerCall, b: &Bound, prod: &Producer) -> Result<LayerOut> {
    let (c, h, w) = image(call, prod)?;
    let scale = b.pair("scale").unwrap_or((1, 1));
    let (oh, ow) = ((h as u128) * (scale.0 as u128), (w as u128) * (scale.1 as u128));
    if oh > MAX_DIM as u128 || ow > MAX_DIM as u128 {
        return Err(err(
            b.tokens_or("scale", &call.tokens),
            format!("{call}: the output [{c}, {oh}, {ow}] is too large (at most 2^31 along an axis)"),
        ));
    }
    let bilinear = b.word("mode") == Some("bilinear");
    let mode = if bilinear { quote!(::rumus::UpsampleMode::Bilinear) } else { quote!(::rumus::UpsampleMode::Nearest) };
    let st = pair_tokens(scale);
    let display = format!("Upsample({}, mode = {})", show_pair(scale), if bilinear { "bilinear" } else { "nearest" });
    Ok(LayerOut {
        out: vec![c, oh as usize, ow as usize],
        display,
        ..simple(call, &prod.shape, "Upsample", quote!(::rumus::nn::Upsample::new(#st, #mode)))
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
    let std = b.float("std", 1.0) as f32;
    // `Embedding::new` is `with_std(.., 1.0, ..)`, PyTorch's N(0, 1).
    let ctor = if b.tokens_or("std", &TokenStream::new()).is_empty() {
        quote!(::rumus::nn::Embedding::new(device, #n, #d, #seed)?)
    } else {
        quote!(::rumus::nn::Embedding::with_std(device, #n, #d, #std, #seed)?)
    };
    Ok(LayerOut {
        out: vec![*t, dim],
        trainable: (num as u128) * (dim as u128),
        display: format!("Embedding({num}, {dim})"),
        embedding: Some((num, dim)),
        ..simple(call, &prod.shape, "Embedding", ctor)
    })
}

/// `[T, E]`, or a spanned error naming what `call` got instead.
fn sequence(call: &LayerCall, prod: &Producer) -> Result<(usize, usize)> {
    match prod.shape.as_slice() {
        [t, e] => Ok((*t, *e)),
        _ => {
            let hint = if let ([t], true) = (prod.shape.as_slice(), prod.indices) {
                format!("{call} runs over a sequence of vectors [T, E]; if the {t} values are token indices, put an `Embedding(vocab, dim)` first to get [{t}, dim]")
            } else {
                format!("{call} runs over sequences [T, E], e.g. after `Embedding(vocab, 64)`")
            };
            Err(err(call, format!("{call} expects a sequence [T, E], but {}\nhint: {hint}", prod.got())))
        }
    }
}

fn positional_embedding(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
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
    let (bl, el, seed) = (lit(block), lit(e), ctx.seed());
    Ok(LayerOut {
        trainable: (block as u128) * (e as u128),
        display: format!("PositionalEmbedding({block}, E = {e})"),
        ..simple(
            call,
            &prod.shape,
            "PositionalEmbedding",
            quote!(::rumus::nn::PositionalEmbedding::new(device, #bl, #el, #std, #seed)?),
        )
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
    ctx.nesting += 1;
    let inferred = infer_list(inner, input, ctx);
    ctx.nesting -= 1;
    let (outs, mut last) = inferred?;
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

/// `MultiHeadAttention`, `CausalSelfAttention` and `TransformerBlock`: [T, E] → [T, E] with E
/// divisible by the number of heads.
fn attention(call: &LayerCall, b: &Bound, prod: &Producer, ctx: &mut Ctx) -> Result<LayerOut> {
    let heads = b.usize("heads").unwrap_or(1);
    let (_, e) = sequence(call, prod)?;
    if e % heads != 0 {
        let divisors: Vec<String> = (1..=e.min(64)).filter(|d| e % d == 0).map(|d| d.to_string()).collect();
        return Err(err(
            b.tokens_or("heads", &call.tokens),
            format!(
                "{call} splits the embedding size E = {e} into {heads} heads of equal size, but heads = {heads} does not divide {e}: {}\nhint: choose heads dividing {e} ({}{})",
                prod.got(),
                divisors.join(", "),
                if e > 64 { ", ..." } else { "" }
            ),
        ));
    }
    let e128 = e as u128;
    let (el, hl, seed) = (lit(e), lit(heads), ctx.seed());
    let dropout = b.float("dropout", 0.0) as f32;
    let bias = b.bool("bias", true);
    let depth = depth_var();
    let (type_name, trainable, ctor) = match call.name.to_string().as_str() {
        "CausalSelfAttention" => {
            ctx.attention_layers += 1;
            (
                "CausalSelfAttention",
                // c_attn [3E, E] (+ [3E]), c_proj [E, E] (+ [E]).
                4 * e128 * e128 + if bias { 4 * e128 } else { 0 },
                quote!(::rumus::nn::CausalSelfAttention::new(device, #el, #hl, #dropout, #bias, #depth, #seed)?),
            )
        }
        "TransformerBlock" => {
            ctx.attention_layers += 1;
            (
                "TransformerBlock",
                // ln_1, attention 4E², ln_2, mlp c_fc [4E, E] and c_proj [E, 4E]; biases 4E + 4E + E
                // and LayerNorm biases 2E, LayerNorm weights 2E.
                12 * e128 * e128 + if bias { 13 * e128 } else { 2 * e128 },
                quote!(::rumus::nn::TransformerBlock::new(device, #el, #hl, #dropout, #bias, #depth, #seed)?),
            )
        }
        _ => {
            let ctor = if b.bool("causal", false) {
                quote!(::rumus::nn::MultiHeadAttention::new(device, #el, #hl, #seed)?.causal(true))
            } else {
                quote!(::rumus::nn::MultiHeadAttention::new(device, #el, #hl, #seed)?)
            };
            // PyTorch layout: in_proj [3E, E] + [3E], out_proj [E, E] + [E].
            ("MultiHeadAttention", 4 * e128 * e128 + 4 * e128, ctor)
        }
    };
    Ok(LayerOut {
        trainable,
        display: format!("{}({heads}, E = {e})", call.name),
        ..simple(call, &prod.shape, type_name, ctor)
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
        // torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)(torch.zeros(1, 4, 7, 8)).shape
        // == [1, 6, 14, 16]
        assert_eq!(
            shapes("ConvTranspose2d(6, kernel = 3, stride = 2, padding = 1, output_padding = 1)", &[4, 7, 8]),
            [vec![6, 14, 16]]
        );
        // torch.nn.ConvTranspose2d(4, 2, (2, 3), stride=(1, 2), dilation=(2, 1))(torch.zeros(1, 4, 4, 5)).shape == [1, 2, 6, 11]
        assert_eq!(
            shapes("ConvTranspose2d(2, kernel = (2, 3), stride = (1, 2), dilation = (2, 1))", &[4, 4, 5]),
            [vec![2, 6, 11]]
        );
        // torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2)(torch.zeros(1, 4, 11)).shape == [1, 6, 5]
        assert_eq!(shapes("Conv1d(6, kernel = 3, stride = 2, padding = 1, dilation = 2)", &[4, 11]), [vec![6, 5]]);
        assert_eq!(shapes("Conv1d(6, 4, padding = same)", &[4, 11]), [vec![6, 11]]);
        assert_eq!(shapes("MaxPool1d(3, stride = 2, padding = 1)", &[4, 10]), [vec![4, 5]]);
        assert_eq!(shapes("AvgPool1d(2)", &[4, 11]), [vec![4, 5]]);
        assert_eq!(shapes("GlobalAvgPool", &[4, 7, 8]), [vec![4]]);
        assert_eq!(shapes("GlobalMaxPool", &[4, 7, 8]), [vec![4]]);
        assert_eq!(shapes("Upsample((2, 3), mode = bilinear)", &[4, 7, 8]), [vec![4, 14, 24]]);
        assert_eq!(
            message("ConvTranspose2d(8, kernel = 1, padding = 1)", &[4, 1, 1]),
            "ConvTranspose2d(8, kernel = 1, padding = 1) leaves no output height: the model input is [4, 1, 1] (height 1), and (1 - 1)·1 - 2·1 + 1·(1 - 1) + 0 + 1 = -1\nhint: use less padding"
        );
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
    fn transformer_layers_keep_the_sequence_and_count_nanogpt_parameters() {
        let (outs, last) = run(
            "Embedding(84, 48, std = 0.02), PositionalEmbedding(32), CausalSelfAttention(4, dropout = 0.1), TransformerBlock(4), TransformerBlock(4, bias = false), MultiHeadAttention(4, causal = true)",
            &[32],
        )
        .unwrap();
        assert_eq!(last.shape, vec![32, 48]);
        let e = 48u128;
        let counts: Vec<u128> = outs.iter().map(|o| o.trainable).collect();
        assert_eq!(
            counts,
            [84 * e, 32 * e, 4 * e * e + 4 * e, 12 * e * e + 13 * e, 12 * e * e + 2 * e, 4 * e * e + 4 * e]
        );
        assert!(outs[5].ctor.to_string().contains(". causal (true)"));
        assert!(outs[0].ctor.to_string().contains("with_std"));
        // Without `std`, PyTorch's N(0, 1) through `Embedding::new`.
        assert!(run("Embedding(84, 48)", &[32]).unwrap().0[0].ctor.to_string().contains("Embedding :: new"));
    }

    #[test]
    fn heads_must_divide_the_width_and_the_block_must_hold_the_sequence() {
        for layer in ["CausalSelfAttention(5)", "TransformerBlock(5)", "MultiHeadAttention(5)"] {
            let m = message(&format!("Embedding(10, 48), {layer}"), &[16]);
            assert!(m.contains("E = 48 into 5 heads") && m.contains("heads = 5 does not divide 48"), "{m}");
            assert!(m.contains("1, 2, 3, 4, 6, 8, 12, 16, 24, 48"), "{m}");
        }
        let m = message("Embedding(10, 8), PositionalEmbedding(12)", &[16]);
        assert!(m.starts_with("PositionalEmbedding(12) holds positions for sequences of at most block length 12, but Embedding(10, 8) produces [16, 8] (T = 16)"), "{m}");
        assert!(m.contains("`PositionalEmbedding(16)`"), "{m}");
        let m = message("Embedding(10, 48), TransformerBlock(48, 6)", &[16]);
        assert!(m.contains("`TransformerBlock(48, 6)` is `TransformerBlock(6)` here"), "{m}");
        let m = message("TransformerBlock(2)", &[16]);
        assert!(
            m.contains("if the 16 values are token indices, put an `Embedding(vocab, dim)` first to get [16, dim]"),
            "{m}"
        );
    }

    #[test]
    fn repeat_expands_in_place_with_a_seed_per_copy() {
        let (outs, last) = run("Embedding(10, 8), Repeat(3, Linear(8), Relu), Linear(2)", &[4]).unwrap();
        assert_eq!(outs.len(), 1 + 3 * 2 + 1);
        assert_eq!(last.shape, vec![4, 2]);
        let seeds: Vec<String> = outs.iter().filter(|o| o.type_name == "Linear").map(|o| o.ctor.to_string()).collect();
        for (i, a) in seeds.iter().enumerate() {
            assert!(seeds[i + 1..].iter().all(|b| b != a), "two layers share a seed: {a}");
        }
        // Shapes flow through every copy: the second copy gets the first one's output.
        let m = message("Embedding(10, 8), Repeat(2, Linear(8 => 4))", &[4]);
        assert!(m.contains("Linear(8 => 4) expects 8 input features, but Linear(8 => 4) produces [4, 4]"), "{m}");
        assert!(m.contains("in copy 2 of 2 of the Repeat"), "{m}");
        assert!(message("Repeat(0, Relu)", &[4]).starts_with("Repeat(0, ..) would repeat its layers 0 times"));
        assert!(message("Repeat(4097, Relu)", &[4]).contains("more than 4096 layers"));
        assert!(message("Repeat(65, Repeat(64, Relu))", &[4]).contains("more than 4096 layers"));
    }

    fn tie_message(layers: &str) -> String {
        let src =
            format!("struct M {{ embed: layers![Embedding(84, 32), Dropout(0.1)], {layers}, tail: layers![Relu] }}");
        let item: syn::ItemStruct = syn::parse_str(&src).unwrap();
        let args = crate::model::parse_args("input = [16]".parse().unwrap()).unwrap();
        let fields = crate::model::parse_fields(&item).unwrap();
        match crate::model::plan(&item, &args, &fields, &Default::default()) {
            Ok(_) => String::new(),
            Err(stop) => stop.error.expect("an error").to_string(),
        }
    }

    #[test]
    fn tie_names_an_earlier_embedding_of_the_same_weight_shape() {
        assert_eq!(tie_message("head: layers![Linear(84, bias = false, tie = embed.0)]"), "");
        let m = tie_message("head: layers![Linear(84, tie = embd.0)]");
        assert!(
            m.starts_with("`tie = embd.0`: the model has no field `embd`") && m.contains("did you mean `embed`?"),
            "{m}"
        );
        let m = tie_message("head: layers![Linear(84, tie = embed.2)]");
        assert!(m.contains("field `embed` has 2 layers (embed.0 to embed.1), so there is no embed.2"), "{m}");
        let m = tie_message("head: layers![Linear(84, tie = embed.1)]");
        assert!(m.starts_with("`tie = embed.1` names Dropout(0.1), which is not an Embedding"), "{m}");
        let m = tie_message("head: layers![Linear(80, tie = embed.0)]");
        assert!(
            m.contains("its weight is [80, 32] (out, in), but Embedding(84, 32) has weight [84, 32] (num, dim)"),
            "{m}"
        );
        let m = tie_message("head: layers![Linear(84, tie = tail.0)]");
        assert!(m.contains("field `tail` comes after this layer"), "{m}");
        let m = tie_message("head: layers![Linear(84, tie = head.0)]");
        assert!(m.contains("head.0 does not come before this layer"), "{m}");
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
