//! The table of built-in layers: their arguments (kinds, defaults, positions), and for each layer
//! its shape rule, parameter count and the runtime constructor to generate.
//!
//! Shapes are per sample (the batch axis is not included). Every rule mirrors PyTorch's.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Error;

use crate::parse::{LayerCall, Result, Value, ValueKind};
use crate::suggest::did_you_mean;

pub type Shape = Vec<usize>;

/// Largest single dimension the macro accepts; larger values are typos, and the bound keeps
/// every product below overflow in `u128`.
pub const MAX_DIM: usize = 1 << 31;

/// What kind of value an argument takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A positive integer.
    Size,
    /// A positive integer or a pair `(h, w)`.
    Size2,
    /// A non-negative integer, a pair, or `same`.
    ConvPad,
    /// A non-negative integer or a pair.
    Pad,
    /// A non-negative integer.
    Count,
    /// A non-negative integer, `same` or `valid` (one axis).
    ConvPad1d,
    /// An upsampling mode: `nearest` or `bilinear`.
    Mode,
    /// A float in `[0, 1)`.
    Prob,
    /// A positive float.
    PosFloat,
    /// Any float.
    Float,
    Bool,
    /// A signed axis.
    Axis,
    /// `out` or `in => out`.
    Features,
    /// One or more integers (variadic).
    Dims,
    /// One or more layers (variadic).
    Layers,
    /// A layer of the model, `field.index`.
    LayerRef,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Size => "a positive integer",
            Kind::Size2 => "a positive integer or a pair `(h, w)`",
            Kind::ConvPad => "a non-negative integer, a pair `(h, w)` or `same`",
            Kind::Pad => "a non-negative integer or a pair `(h, w)`",
            Kind::Count => "a non-negative integer",
            Kind::ConvPad1d => "a non-negative integer, `same` or `valid`",
            Kind::Mode => "`nearest` or `bilinear`",
            Kind::Prob => "a probability in [0, 1)",
            Kind::PosFloat => "a positive number",
            Kind::Float => "a number",
            Kind::Bool => "`true` or `false`",
            Kind::Axis => "an integer axis (negative counts from the end)",
            Kind::Features => "a positive integer `out` or `in => out`",
            Kind::Dims => "integers",
            Kind::Layers => "layers",
            Kind::LayerRef => "a layer of this model written `field.index`, e.g. `embed.0`",
        }
    }

    fn variadic(self) -> bool {
        matches!(self, Kind::Dims | Kind::Layers)
    }
}

/// One argument of a layer.
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// May be given without its name, in table order.
    pub positional: bool,
    pub required: bool,
    /// The default as shown in docs and errors.
    pub default: &'static str,
}

/// One built-in layer.
pub struct LayerSpec {
    pub name: &'static str,
    pub args: &'static [ArgSpec],
    /// The shape rule, for docs.
    pub rule: &'static str,
}

const fn pos(name: &'static str, kind: Kind) -> ArgSpec {
    ArgSpec { name, kind, positional: true, required: true, default: "" }
}
const fn pos_opt(name: &'static str, kind: Kind, default: &'static str) -> ArgSpec {
    ArgSpec { name, kind, positional: true, required: false, default }
}
const fn named(name: &'static str, kind: Kind, default: &'static str) -> ArgSpec {
    ArgSpec { name, kind, positional: false, required: false, default }
}

const NO_ARGS: &[ArgSpec] = &[];
const ELEMENTWISE: &str = "any shape → the same shape";

/// Every built-in layer. The order is the order of the docs.
pub static LAYERS: &[LayerSpec] = &[
    LayerSpec {
        name: "Linear",
        args: &[pos("out", Kind::Features), named("bias", Kind::Bool, "true"), named("tie", Kind::LayerRef, "none")],
        rule: "[in] → [out], or [T, in] → [T, out]",
    },
    LayerSpec {
        name: "Conv2d",
        args: &[
            pos("out", Kind::Features),
            pos("kernel", Kind::Size2),
            named("stride", Kind::Size2, "1"),
            named("padding", Kind::ConvPad, "0"),
            named("dilation", Kind::Size2, "1"),
            named("groups", Kind::Size, "1"),
            named("bias", Kind::Bool, "true"),
        ],
        rule: "[C, H, W] → [out, H', W'], H' = floor((H + 2p - d(k-1) - 1)/s) + 1",
    },
    LayerSpec {
        name: "MaxPool2d",
        args: &[
            pos("kernel", Kind::Size2),
            named("stride", Kind::Size2, "kernel"),
            named("padding", Kind::Pad, "0"),
            named("dilation", Kind::Size2, "1"),
        ],
        rule: "[C, H, W] → [C, H', W'], H' = floor((H + 2p - d(k-1) - 1)/s) + 1",
    },
    LayerSpec {
        name: "AvgPool2d",
        args: &[pos("kernel", Kind::Size2), named("stride", Kind::Size2, "kernel"), named("padding", Kind::Pad, "0")],
        rule: "[C, H, W] → [C, H', W'], H' = floor((H + 2p - k)/s) + 1",
    },
    LayerSpec { name: "AdaptiveAvgPool2d", args: &[pos("size", Kind::Dims)], rule: "[C, H, W] → [C, oh, ow]" },
    LayerSpec {
        name: "ConvTranspose2d",
        args: &[
            pos("out", Kind::Features),
            pos("kernel", Kind::Size2),
            named("stride", Kind::Size2, "1"),
            named("padding", Kind::Pad, "0"),
            named("output_padding", Kind::Pad, "0"),
            named("dilation", Kind::Size2, "1"),
            named("groups", Kind::Size, "1"),
            named("bias", Kind::Bool, "true"),
        ],
        rule: "[C, H, W] → [out, H', W'], H' = (H - 1)s - 2p + d(k-1) + output_padding + 1",
    },
    LayerSpec {
        name: "Conv1d",
        args: &[
            pos("out", Kind::Features),
            pos("kernel", Kind::Size),
            named("stride", Kind::Size, "1"),
            named("padding", Kind::ConvPad1d, "0"),
            named("dilation", Kind::Size, "1"),
            named("groups", Kind::Size, "1"),
            named("bias", Kind::Bool, "true"),
        ],
        rule: "[C, L] → [out, L'], L' = floor((L + 2p - d(k-1) - 1)/s) + 1",
    },
    LayerSpec {
        name: "MaxPool1d",
        args: &[
            pos("kernel", Kind::Size),
            named("stride", Kind::Size, "kernel"),
            named("padding", Kind::Count, "0"),
            named("dilation", Kind::Size, "1"),
        ],
        rule: "[C, L] → [C, L'], L' = floor((L + 2p - d(k-1) - 1)/s) + 1",
    },
    LayerSpec {
        name: "AvgPool1d",
        args: &[pos("kernel", Kind::Size), named("stride", Kind::Size, "kernel"), named("padding", Kind::Count, "0")],
        rule: "[C, L] → [C, L'], L' = floor((L + 2p - k)/s) + 1",
    },
    LayerSpec { name: "GlobalAvgPool", args: NO_ARGS, rule: "[C, H, W] → [C] (the mean of each channel)" },
    LayerSpec { name: "GlobalMaxPool", args: NO_ARGS, rule: "[C, H, W] → [C] (the maximum of each channel)" },
    LayerSpec {
        name: "Upsample",
        args: &[pos("scale", Kind::Size2), named("mode", Kind::Mode, "nearest")],
        rule: "[C, H, W] → [C, H·sh, W·sw]",
    },
    LayerSpec { name: "Flatten", args: NO_ARGS, rule: "[d0, d1, ...] → [d0 · d1 · ...]" },
    LayerSpec {
        name: "Reshape",
        args: &[pos("shape", Kind::Dims)],
        rule: "any shape → the given shape (same element count; one -1 is inferred)",
    },
    LayerSpec { name: "Dropout", args: &[pos_opt("p", Kind::Prob, "0.5")], rule: ELEMENTWISE },
    LayerSpec {
        name: "BatchNorm1d",
        args: &[
            pos_opt("features", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("momentum", Kind::Prob, "0.1"),
        ],
        rule: "[C] or [C, L] → the same shape",
    },
    LayerSpec {
        name: "BatchNorm2d",
        args: &[
            pos_opt("features", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("momentum", Kind::Prob, "0.1"),
        ],
        rule: "[C, H, W] → the same shape",
    },
    LayerSpec {
        name: "LayerNorm",
        args: &[
            pos_opt("shape", Kind::Dims, "last axis"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("affine", Kind::Bool, "true"),
        ],
        rule: "[..., *shape] → the same shape",
    },
    LayerSpec {
        name: "Embedding",
        args: &[pos("num", Kind::Size), pos("dim", Kind::Size), named("std", Kind::PosFloat, "1.0")],
        rule: "[T] token indices → [T, dim]",
    },
    LayerSpec {
        name: "PositionalEmbedding",
        args: &[pos("block", Kind::Size), named("std", Kind::PosFloat, "0.02")],
        rule: "[T, E] → [T, E] (adds a learned vector per position), T ≤ block",
    },
    LayerSpec { name: "Relu", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "Sigmoid", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "Tanh", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "Gelu", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "GeluTanh", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "Silu", args: NO_ARGS, rule: ELEMENTWISE },
    LayerSpec { name: "LeakyRelu", args: &[pos_opt("slope", Kind::Float, "0.01")], rule: ELEMENTWISE },
    LayerSpec { name: "Softmax", args: &[pos_opt("axis", Kind::Axis, "-1")], rule: ELEMENTWISE },
    LayerSpec { name: "LogSoftmax", args: &[pos_opt("axis", Kind::Axis, "-1")], rule: ELEMENTWISE },
    LayerSpec {
        name: "Residual",
        args: &[pos("layers", Kind::Layers)],
        rule: "x → x + layers(x); the layers must preserve the shape",
    },
    LayerSpec {
        name: "MultiHeadAttention",
        args: &[pos("heads", Kind::Size), named("causal", Kind::Bool, "false")],
        rule: "[T, E] → [T, E], E divisible by heads",
    },
    LayerSpec {
        name: "CausalSelfAttention",
        args: &[pos("heads", Kind::Size), named("dropout", Kind::Prob, "0.0"), named("bias", Kind::Bool, "true")],
        rule: "[T, E] → [T, E], E divisible by heads; position t attends to positions ≤ t",
    },
    LayerSpec {
        name: "TransformerBlock",
        args: &[pos("heads", Kind::Size), named("dropout", Kind::Prob, "0.0"), named("bias", Kind::Bool, "true")],
        rule: "[T, E] → [T, E], E divisible by heads; x + attn(ln_1(x)), then x + mlp(ln_2(x))",
    },
    LayerSpec {
        name: "Repeat",
        args: &[pos("n", Kind::Size), pos("layers", Kind::Layers)],
        rule: "x → the layers applied n times in a row (n copies, each with its own parameters)",
    },
];

pub fn find(name: &str) -> Option<&'static LayerSpec> {
    LAYERS.iter().find(|l| l.name == name)
}

/// A validated argument value.
#[derive(Clone, Debug)]
pub enum Val {
    Usize(usize),
    Pair(usize, usize),
    Same,
    /// A word argument such as an upsampling mode.
    Word(String),
    Float(f64),
    Bool(bool),
    Int(i64),
    Features(Option<usize>, usize),
    Dims(Vec<i64>),
    Layers(Vec<LayerCall>),
    /// `field.index`.
    Ref(String, usize),
}

/// A layer's arguments after binding positional and named ones to the table.
pub struct Bound {
    vals: Vec<(&'static str, Val, TokenStream)>,
}

impl Bound {
    fn get(&self, name: &str) -> Option<&Val> {
        self.vals.iter().find(|(n, _, _)| *n == name).map(|(_, v, _)| v)
    }
    /// The tokens of argument `name` (for spans), or `fallback` when it was defaulted.
    pub fn tokens_or<'a>(&'a self, name: &str, fallback: &'a TokenStream) -> &'a TokenStream {
        self.vals.iter().find(|(n, _, _)| *n == name).map(|(_, _, t)| t).unwrap_or(fallback)
    }
    pub fn usize(&self, name: &str) -> Option<usize> {
        match self.get(name) {
            Some(Val::Usize(v)) => Some(*v),
            _ => None,
        }
    }
    pub fn pair(&self, name: &str) -> Option<(usize, usize)> {
        match self.get(name) {
            Some(Val::Pair(a, b)) => Some((*a, *b)),
            _ => None,
        }
    }
    pub fn word(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Val::Word(w)) => Some(w),
            _ => None,
        }
    }
    pub fn is_same(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Val::Same))
    }
    pub fn float(&self, name: &str, default: f64) -> f64 {
        match self.get(name) {
            Some(Val::Float(v)) => *v,
            _ => default,
        }
    }
    pub fn bool(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            Some(Val::Bool(v)) => *v,
            _ => default,
        }
    }
    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.get(name) {
            Some(Val::Int(v)) => *v,
            _ => default,
        }
    }
    pub fn features(&self) -> Option<(Option<usize>, usize)> {
        match self.get("out") {
            Some(Val::Features(i, o)) => Some((*i, *o)),
            _ => None,
        }
    }
    pub fn dims(&self, name: &str) -> Option<&[i64]> {
        match self.get(name) {
            Some(Val::Dims(d)) => Some(d),
            _ => None,
        }
    }
    /// The `field.index` of argument `name`, if given.
    pub fn layer_ref(&self, name: &str) -> Option<(&str, usize)> {
        match self.get(name) {
            Some(Val::Ref(field, index)) => Some((field, *index)),
            _ => None,
        }
    }
    pub fn layers(&self) -> &[LayerCall] {
        match self.get("layers") {
            Some(Val::Layers(l)) => l,
            _ => &[],
        }
    }
}

/// Binds `call`'s arguments to `spec`: positional in table order, named by name; reports unknown,
/// duplicate, missing and mistyped arguments on the argument itself.
pub fn bind(spec: &LayerSpec, call: &LayerCall) -> Result<Bound> {
    let layer = spec.name;
    let positional: Vec<&ArgSpec> = spec.args.iter().filter(|a| a.positional).collect();
    let mut next_pos = 0;
    let mut bound = Bound { vals: Vec::new() };
    for arg in &call.args {
        let aspec = match &arg.name {
            None => match positional.get(next_pos) {
                Some(a) => {
                    if !a.kind.variadic() {
                        next_pos += 1;
                    }
                    *a
                }
                None if spec.args.is_empty() => {
                    return Err(Error::new_spanned(arg, format!("{layer} takes no arguments\nhint: write `{layer}`")));
                }
                None => {
                    let names: Vec<&str> = positional.iter().map(|a| a.name).collect();
                    let foreign = foreign_positional(layer, call).map(|h| format!("{h}; ")).unwrap_or_default();
                    return Err(Error::new_spanned(
                        arg,
                        format!(
                            "too many positional arguments for {layer}: it takes {} ({})\nhint: {foreign}give the others by name: {}",
                            positional.len(),
                            names.join(", "),
                            arg_list(spec)
                        ),
                    ));
                }
            },
            Some(name) => {
                let name_str = name.to_string();
                match spec.args.iter().find(|a| a.name == name_str) {
                    Some(a) => a,
                    None => {
                        let hint = match foreign_name(layer, &name_str) {
                            Some(h) => format!("{h}; "),
                            None => match did_you_mean(&name_str, spec.args.iter().map(|a| a.name)) {
                                Some(s) => format!("did you mean `{s}`? "),
                                None => String::new(),
                            },
                        };
                        let takes = if spec.args.is_empty() { "no arguments".to_string() } else { arg_list(spec) };
                        return Err(Error::new_spanned(
                            name,
                            format!("{layer} has no argument `{name_str}`\nhint: {hint}{layer} takes {takes}"),
                        ));
                    }
                }
            }
        };
        let val = convert(layer, aspec, &arg.value)?;
        match (bound.vals.iter_mut().find(|(n, _, _)| *n == aspec.name), val) {
            // Variadic arguments accumulate.
            (Some((_, Val::Dims(all), toks)), Val::Dims(more)) if arg.name.is_none() => {
                all.extend(more);
                toks.extend(arg.tokens.clone());
            }
            (Some((_, Val::Layers(all), toks)), Val::Layers(more)) if arg.name.is_none() => {
                all.extend(more);
                toks.extend(arg.tokens.clone());
            }
            (Some((_, _, first)), _) => {
                let first = first.to_string();
                return Err(Error::new_spanned(
                    arg,
                    format!(
                        "argument `{}` of {layer} is given twice: first `{first}`, then `{arg}`\nhint: keep one of them",
                        aspec.name
                    ),
                ));
            }
            (None, val) => bound.vals.push((aspec.name, val, arg.tokens.clone())),
        }
    }
    for a in spec.args.iter().filter(|a| a.required) {
        if bound.get(a.name).is_none() {
            return Err(Error::new_spanned(
                call,
                format!("{layer} needs its `{}` argument ({})\nhint: {}", a.name, a.kind.describe(), example(layer)),
            ));
        }
    }
    Ok(bound)
}

/// PyTorch's and Keras's names for the arguments of the built-in layers, as
/// `(layers, foreign name, rumus argument, how to write it)`; `*` matches every layer.
const FOREIGN_ARGS: &[(&[&str], &str, &str, &str)] = &[
    (
        &["Conv2d", "ConvTranspose2d", "Conv1d", "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d"],
        "kernel_size",
        "kernel",
        "`kernel = 3`",
    ),
    (&["MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d"], "pool_size", "kernel", "`kernel = 2`"),
    (
        &["Conv2d", "ConvTranspose2d", "Conv1d", "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d"],
        "strides",
        "stride",
        "`stride = 2`",
    ),
    (&["Conv2d", "ConvTranspose2d", "Conv1d", "MaxPool2d", "MaxPool1d"], "dilation_rate", "dilation", "`dilation = 2`"),
    (&["Upsample"], "scale_factor", "scale", "`Upsample(2)` or `Upsample((2, 3))`"),
    (&["Upsample"], "size", "scale", "`Upsample(2)`: the integer factor, not the output size"),
    (&["Upsample"], "interpolation", "mode", "`mode = bilinear`"),
    (&["ConvTranspose2d"], "out_channels", "out", "`ConvTranspose2d(out, kernel = k)`"),
    (&["ConvTranspose2d"], "filters", "out", "`ConvTranspose2d(out, kernel = k)`"),
    (&["Conv1d"], "out_channels", "out", "`Conv1d(out, kernel = k)`"),
    (&["Conv1d"], "filters", "out", "`Conv1d(out, kernel = k)`"),
    (
        &["Linear"],
        "in_features",
        "out",
        "`Linear(in => out)`; the input features are inferred, so `Linear(out)` is enough",
    ),
    (&["Linear"], "out_features", "out", "`Linear(out)` or `Linear(in => out)`"),
    (&["Linear"], "units", "out", "`Linear(out)`"),
    (
        &["Conv2d"],
        "in_channels",
        "out",
        "`Conv2d(in => out, ..)`; the input channels are inferred, so `Conv2d(out, ..)` is enough",
    ),
    (&["Conv2d"], "out_channels", "out", "`Conv2d(out, kernel = k)`"),
    (&["Conv2d"], "filters", "out", "`Conv2d(out, kernel = k)`"),
    (&["Linear", "Conv2d", "ConvTranspose2d", "Conv1d"], "use_bias", "bias", "`bias = false`"),
    (&["MultiHeadAttention"], "n_heads", "heads", "`MultiHeadAttention(heads)`"),
    (
        &["MultiHeadAttention"],
        "embed_dim",
        "heads",
        "`MultiHeadAttention(heads)`; the embedding size is inferred from the input",
    ),
    (&["Dropout"], "rate", "p", "`Dropout(0.5)` or `Dropout(p = 0.5)`"),
    (&["Dropout"], "prob", "p", "`Dropout(0.5)` or `Dropout(p = 0.5)`"),
    (&["Dropout"], "drop_rate", "p", "`Dropout(0.5)` or `Dropout(p = 0.5)`"),
    (&["Embedding"], "num_embeddings", "num", "`Embedding(num, dim)`"),
    (&["Embedding"], "input_dim", "num", "`Embedding(num, dim)`"),
    (&["Embedding"], "embedding_dim", "dim", "`Embedding(num, dim)`"),
    (&["Embedding"], "output_dim", "dim", "`Embedding(num, dim)`"),
    (&["Embedding"], "init_std", "std", "`Embedding(num, dim, std = 0.02)`"),
    (&["PositionalEmbedding"], "block_size", "block", "`PositionalEmbedding(256)`"),
    (&["PositionalEmbedding"], "max_len", "block", "`PositionalEmbedding(256)`"),
    (&["CausalSelfAttention", "TransformerBlock"], "n_head", "heads", "`TransformerBlock(6)`"),
    (&["CausalSelfAttention", "TransformerBlock"], "num_heads", "heads", "`TransformerBlock(6)`"),
    (&["MultiHeadAttention"], "num_heads", "heads", "`MultiHeadAttention(heads)`"),
    (
        &["CausalSelfAttention", "TransformerBlock"],
        "n_embd",
        "heads",
        "`TransformerBlock(heads)`; the embedding size is inferred from the input",
    ),
    (&["CausalSelfAttention", "TransformerBlock"], "p", "dropout", "`dropout = 0.2`"),
    (&["Linear"], "tied", "tie", "`tie = embed.0`"),
    (&["Linear"], "tie_weights", "tie", "`tie = embed.0`"),
    (&["Repeat"], "times", "n", "`Repeat(6, TransformerBlock(6))`"),
    (&["BatchNorm1d", "BatchNorm2d"], "num_features", "features", "`BatchNorm2d` (inferred) or `BatchNorm2d(c)`"),
    (&["BatchNorm1d", "BatchNorm2d", "LayerNorm"], "epsilon", "eps", "`eps = 1e-5`"),
    (&["LayerNorm"], "normalized_shape", "shape", "`LayerNorm` (the last axis) or `LayerNorm(d0, d1)`"),
    (&["LayerNorm"], "elementwise_affine", "affine", "`affine = false`"),
    (&["LeakyRelu"], "negative_slope", "slope", "`LeakyRelu(0.2)`"),
    (&["LeakyRelu"], "alpha", "slope", "`LeakyRelu(0.2)`"),
    (&["Softmax", "LogSoftmax"], "dim", "axis", "`Softmax(axis = -1)`"),
    (&["AdaptiveAvgPool2d"], "output_size", "size", "`AdaptiveAvgPool2d(1)`"),
];

/// PyTorch's positional order where it differs from ours: `Linear(784, 10)` is (in, out) there.
fn foreign_positional(layer: &str, call: &LayerCall) -> Option<String> {
    let pos: Vec<String> = call.args.iter().filter(|a| a.name.is_none()).map(|a| a.value.to_string()).collect();
    match (layer, pos.as_slice()) {
        ("Linear", [i, o]) => Some(format!(
            "PyTorch's `Linear({i}, {o})` (in, out) is `Linear({i} => {o})` here, or `Linear({o})` with the input features inferred"
        )),
        ("Conv2d", [i, o, k, ..]) => Some(format!(
            "PyTorch's `Conv2d({i}, {o}, {k})` (in, out, kernel) is `Conv2d({i} => {o}, kernel = {k})` here, or `Conv2d({o}, kernel = {k})` with the input channels inferred"
        )),
        ("ConvTranspose2d" | "Conv1d", [i, o, k, ..]) => Some(format!(
            "PyTorch's `{layer}({i}, {o}, {k})` (in, out, kernel) is `{layer}({i} => {o}, kernel = {k})` here, or `{layer}({o}, kernel = {k})` with the input channels inferred"
        )),
        ("MaxPool2d" | "AvgPool2d" | "MaxPool1d" | "AvgPool1d", [k, st, ..]) => {
            Some(format!("PyTorch's second positional argument is the stride: `{layer}({k}, stride = {st})`"))
        }
        ("MultiHeadAttention", [e, h]) => Some(format!(
            "PyTorch's `MultiheadAttention({e}, {h})` (embed_dim, num_heads) is `MultiHeadAttention({h})` here; the embedding size is inferred"
        )),
        ("CausalSelfAttention" | "TransformerBlock", [e, h]) => Some(format!(
            "a `(n_embd, n_head)` pair such as `{layer}({e}, {h})` is `{layer}({h})` here; the embedding size is inferred"
        )),
        _ => None,
    }
}

/// `did you mean `kernel`? (PyTorch's `kernel_size` is `kernel` here: `kernel = 3`)`.
fn foreign_name(layer: &str, name: &str) -> Option<String> {
    FOREIGN_ARGS.iter().find(|(layers, foreign, _, _)| *foreign == name && layers.contains(&layer)).map(
        |(_, foreign, ours, example)| {
            format!("did you mean `{ours}`? (`{foreign}` in PyTorch or Keras is `{ours}` here: {example})")
        },
    )
}

fn arg_list(spec: &LayerSpec) -> String {
    let parts: Vec<String> = spec
        .args
        .iter()
        .map(|a| if a.default.is_empty() { a.name.to_string() } else { format!("{} = {}", a.name, a.default) })
        .collect();
    format!("({})", parts.join(", "))
}

/// A working example of each layer that needs arguments, for hints.
pub fn example(layer: &str) -> &'static str {
    match layer {
        "Linear" => "e.g. `Linear(10)` or `Linear(784 => 10)`",
        "Conv2d" => "e.g. `Conv2d(16, kernel = 3, padding = 1)`",
        "MaxPool2d" => "e.g. `MaxPool2d(2)`",
        "AvgPool2d" => "e.g. `AvgPool2d(2)`",
        "AdaptiveAvgPool2d" => "e.g. `AdaptiveAvgPool2d(1)` or `AdaptiveAvgPool2d(7, 7)`",
        "ConvTranspose2d" => "e.g. `ConvTranspose2d(16, kernel = 3, stride = 2, padding = 1, output_padding = 1)`",
        "Conv1d" => "e.g. `Conv1d(16, kernel = 3, padding = same)`",
        "MaxPool1d" => "e.g. `MaxPool1d(2)`",
        "AvgPool1d" => "e.g. `AvgPool1d(2)`",
        "Upsample" => "e.g. `Upsample(2)` or `Upsample(2, mode = bilinear)`",
        "Reshape" => "e.g. `Reshape(1, 28, 28)`",
        "Embedding" => "e.g. `Embedding(1000, 64)` (vocabulary size, embedding size)",
        "Residual" => "e.g. `Residual(Linear(64), Relu, Linear(64))`",
        "MultiHeadAttention" => "e.g. `MultiHeadAttention(8)` or `MultiHeadAttention(8, causal = true)`",
        "PositionalEmbedding" => "e.g. `PositionalEmbedding(256)` (the longest sequence, the block length)",
        "CausalSelfAttention" => "e.g. `CausalSelfAttention(6, dropout = 0.2)`",
        "TransformerBlock" => "e.g. `TransformerBlock(6, dropout = 0.2)`",
        "Repeat" => "e.g. `Repeat(6, TransformerBlock(6))`",
        _ => "see docs/DSL.md",
    }
}

fn type_error(layer: &str, a: &ArgSpec, v: &Value) -> Error {
    let hint = match &v.kind {
        ValueKind::Word(w) if w == "True" || w == "False" => {
            format!("\nhint: Rust spells it `{}`", w.to_string().to_lowercase())
        }
        _ => String::new(),
    };
    Error::new_spanned(v, format!("argument `{}` of {layer} must be {}, got `{v}`{hint}", a.name, a.kind.describe()))
}

fn int_of(v: &Value) -> Option<i128> {
    match v.kind {
        ValueKind::Int(i) => Some(i),
        _ => None,
    }
}

/// A size-like integer: checks the sign (`min` is 0 or 1) and the upper bound.
fn size_of(layer: &str, a: &ArgSpec, v: &Value, min: i128) -> Result<usize> {
    let i = int_of(v).ok_or_else(|| type_error(layer, a, v))?;
    if i < min && layer == "Repeat" {
        return Err(Error::new_spanned(
            v,
            format!("Repeat({i}, ..) would repeat its layers {i} times; it needs at least one copy\nhint: write `Repeat(1, ..)` or remove the Repeat"),
        ));
    }
    if i < min {
        let need = if min == 0 { "non-negative" } else { "positive" };
        return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be {need}, got {i}", a.name)));
    }
    if i > MAX_DIM as i128 {
        return Err(Error::new_spanned(
            v,
            format!("argument `{}` of {layer} is too large: {i} (at most 2^31)", a.name),
        ));
    }
    Ok(i as usize)
}

fn pair_of(layer: &str, a: &ArgSpec, v: &Value, min: i128) -> Result<(usize, usize)> {
    match &v.kind {
        ValueKind::Int(_) => {
            let s = size_of(layer, a, v, min)?;
            Ok((s, s))
        }
        ValueKind::Tuple(items) | ValueKind::List(items) if items.len() == 2 => {
            Ok((size_of(layer, a, &items[0], min)?, size_of(layer, a, &items[1], min)?))
        }
        _ => Err(type_error(layer, a, v)),
    }
}

fn float_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<f64> {
    let f = match v.kind {
        ValueKind::Float(f) => f,
        ValueKind::Int(i) => i as f64,
        _ => return Err(type_error(layer, a, v)),
    };
    // Generated code writes these as f32 literals, which must be finite.
    if !f.is_finite() || !(f as f32).is_finite() {
        return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be a finite number", a.name)));
    }
    Ok(f)
}

fn convert(layer: &str, a: &ArgSpec, v: &Value) -> Result<Val> {
    Ok(match a.kind {
        Kind::Size => Val::Usize(size_of(layer, a, v, 1)?),
        Kind::Size2 => {
            let (h, w) = pair_of(layer, a, v, 1)?;
            Val::Pair(h, w)
        }
        Kind::Pad => {
            let (h, w) = pair_of(layer, a, v, 0)?;
            Val::Pair(h, w)
        }
        Kind::Count => Val::Usize(size_of(layer, a, v, 0)?),
        Kind::ConvPad1d => match &v.kind {
            ValueKind::Word(w) if w == "same" => Val::Same,
            ValueKind::Word(w) if w == "valid" => Val::Usize(0),
            ValueKind::Word(_) => {
                return Err(Error::new_spanned(
                    v,
                    format!("argument `padding` of {layer} must be {}, got `{v}`\nhint: the words it knows are `same` and `valid`", a.kind.describe()),
                ))
            }
            _ => Val::Usize(size_of(layer, a, v, 0)?),
        },
        Kind::Mode => match &v.kind {
            ValueKind::Word(w) if w == "nearest" || w == "bilinear" => Val::Word(w.to_string()),
            _ => {
                return Err(Error::new_spanned(
                    v,
                    format!("argument `{}` of {layer} must be {}, got `{v}`\nhint: `mode = bilinear` (align_corners = false, as PyTorch's default)", a.name, a.kind.describe()),
                ))
            }
        },
        Kind::ConvPad => match &v.kind {
            ValueKind::Word(w) if w == "same" => Val::Same,
            ValueKind::Word(w) if w == "valid" => Val::Pair(0, 0),
            ValueKind::Word(_) => {
                return Err(Error::new_spanned(
                    v,
                    format!("argument `padding` of {layer} must be {}, got `{v}`\nhint: the words it knows are `same` and `valid`", a.kind.describe()),
                ))
            }
            _ => {
                let (h, w) = pair_of(layer, a, v, 0)?;
                Val::Pair(h, w)
            }
        },
        Kind::Prob => {
            let p = float_of(layer, a, v)?;
            if !(0.0..1.0).contains(&p) {
                return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be in [0, 1), got {p}", a.name)));
            }
            Val::Float(p)
        }
        Kind::PosFloat => {
            let f = float_of(layer, a, v)?;
            if f <= 0.0 {
                return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be positive, got {f}", a.name)));
            }
            Val::Float(f)
        }
        Kind::Float => Val::Float(float_of(layer, a, v)?),
        Kind::Bool => match v.kind {
            ValueKind::Bool(b) => Val::Bool(b),
            _ => return Err(type_error(layer, a, v)),
        },
        Kind::Axis => {
            let i = int_of(v).ok_or_else(|| type_error(layer, a, v))?;
            if i.unsigned_abs() > 64 {
                return Err(Error::new_spanned(v, format!("axis {i} of {layer} is out of range")));
            }
            Val::Int(i as i64)
        }
        Kind::Features => match &v.kind {
            ValueKind::Int(_) => Val::Features(None, size_of(layer, a, v, 1)?),
            ValueKind::Arrow(i, o) => Val::Features(Some(size_of(layer, a, i, 1)?), size_of(layer, a, o, 1)?),
            _ => return Err(type_error(layer, a, v)),
        },
        Kind::Dims => {
            let items: Vec<&Value> = match &v.kind {
                ValueKind::Tuple(items) | ValueKind::List(items) => items.iter().collect(),
                _ => vec![v],
            };
            let mut dims = Vec::new();
            for item in items {
                let i = int_of(item).ok_or_else(|| type_error(layer, a, item))?;
                if i > MAX_DIM as i128 {
                    return Err(Error::new_spanned(
                        item,
                        format!("argument `{}` of {layer} is too large: {i} (at most 2^31)", a.name),
                    ));
                }
                if i < -1 {
                    return Err(Error::new_spanned(
                        item,
                        format!("argument `{}` of {layer} must be positive sizes (or -1 to infer one), got {i}", a.name),
                    ));
                }
                dims.push(i as i64);
            }
            Val::Dims(dims)
        }
        Kind::Layers => match &v.kind {
            ValueKind::Call(c) => Val::Layers(vec![c.clone()]),
            ValueKind::Word(w) => Val::Layers(vec![LayerCall { name: w.clone(), args: Vec::new(), tokens: v.tokens.clone() }]),
            _ => return Err(Error::new_spanned(v, format!("{layer} takes layers, got `{v}`\nhint: {}", example(layer)))),
        },
        Kind::LayerRef => match &v.kind {
            ValueKind::Ref(field, index) if *index >= 0 && *index <= MAX_DIM as i128 => {
                Val::Ref(field.to_string(), *index as usize)
            }
            _ => return Err(type_error(layer, a, v)),
        },
    })
}

/// Helpers for the generated constructor code.
pub fn lit(n: usize) -> proc_macro2::Literal {
    proc_macro2::Literal::usize_unsuffixed(n)
}

pub fn pair_tokens((a, b): (usize, usize)) -> TokenStream {
    let (a, b) = (lit(a), lit(b));
    quote!((#a, #b))
}

pub fn fmt_shape(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    /// Every foreign name maps to an argument its layers really have.
    #[test]
    fn foreign_names_map_to_real_arguments() {
        for (layers, foreign, ours, _) in super::FOREIGN_ARGS {
            for l in *layers {
                let spec = super::find(l).unwrap_or_else(|| panic!("{l} is not a layer"));
                assert!(spec.args.iter().any(|a| a.name == *ours), "{l} has no `{ours}` (for `{foreign}`)");
                assert!(spec.args.iter().all(|a| a.name != *foreign), "{l} already takes `{foreign}`");
            }
        }
    }

    /// docs/DSL.md and README.md document every layer with the rule this table states.
    #[test]
    fn docs_state_every_layer_and_rule() {
        for (file, docs) in
            [("docs/DSL.md", include_str!("../../docs/DSL.md")), ("README.md", include_str!("../../README.md"))]
        {
            for l in super::LAYERS {
                assert!(docs.contains(&format!("`{}`", l.name)), "{file} does not mention {}", l.name);
                assert!(docs.contains(l.rule), "{file} does not state the rule of {}: {}", l.name, l.rule);
            }
        }
    }
}
