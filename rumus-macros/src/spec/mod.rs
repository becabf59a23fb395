//! The table of built-in layers: for each layer its arguments (kinds, defaults, positions), its
//! shape rule (a function of [`crate::analyse::rules`]), its documented rule and an example.
//! [`bind`] checks a call's arguments against its row; [`foreign`] knows PyTorch's and Keras's
//! names for layers and arguments.
//!
//! Shapes are per sample (the batch axis is not included). Every rule mirrors PyTorch's.

mod bind;
pub mod foreign;

pub use bind::{bind, Bound};

use crate::analyse::rules::{attention, block, conv, conv1d, dense, elementwise, embedding, norm, recurrent, reshape};
use crate::analyse::walk::{Ctx, Expanded, Site};
use crate::analyse::Layer;
use crate::parse::Result;

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
    /// A side branch: one layer, or layers in parentheses `(A, B)` (`Residual`'s `shortcut`).
    Branch,
    /// A layer of the model, `field.index`.
    LayerRef,
}

impl Kind {
    pub fn describe(self) -> &'static str {
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
            Kind::Branch => "a layer or layers in parentheses, e.g. `(Conv2d(128, 1, stride = 2), BatchNorm2d)`",
            Kind::LayerRef => "a layer of this model written `field.index`, e.g. `embed.0`",
        }
    }

    pub fn variadic(self) -> bool {
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

/// One built-in layer: everything the macro knows about it, in one row of [`LAYERS`].
pub struct LayerSpec {
    /// The name written in `layers![..]`, also the type named in `summary()`.
    pub name: &'static str,
    pub args: &'static [ArgSpec],
    /// The shape rule as docs/DSL.md and README.md state it.
    pub doc_rule: &'static str,
    /// The shape rule itself: from the input shape and the bound arguments, the typed layer
    /// (its kind, output shape, parameter counts) or a spanned error.
    pub rule: Rule,
    /// A working use of the layer, for hints: "e.g. `Linear(10)`" (checked to bind).
    pub example: &'static str,
    /// Whatever its arguments, the output shape is the input shape (dropout, activations,
    /// the 1-d norms): a failed model's output is guessed from the layer before it.
    pub keeps_shape: bool,
}

/// How a layer's shape rule applies.
pub enum Rule {
    /// One layer: its function in [`crate::analyse::rules`].
    Layer(fn(&Site, &mut Ctx) -> Result<Layer>),
    /// A layer that stands for other layers, expanded in place (`Repeat`): every resulting
    /// layer, and what the next layer receives.
    Expand(fn(&Site, &mut Ctx) -> Result<Expanded>),
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
/// The hint of a layer without arguments worth an example.
const SEE_DOCS: &str = "see docs/DSL.md";

/// `Lstm` and `Gru` take the same arguments and follow the same rule.
const RECURRENT_ARGS: &[ArgSpec] = &[
    pos("hidden", Kind::Size),
    named("layers", Kind::Size, "1"),
    named("bidirectional", Kind::Bool, "false"),
    named("dropout", Kind::Prob, "0.0"),
    named("return_sequences", Kind::Bool, "true"),
];
const RECURRENT_RULE: &str =
    "[T, F] → [T, H·dirs], or the last state [H·dirs] with return_sequences = false (dirs = 2 if bidirectional)";

/// Every built-in layer. The order is the order of the docs. Adding a layer: see "Checklist:
/// adding a layer" in docs/ARCHITECTURE.md.
pub static LAYERS: &[LayerSpec] = &[
    LayerSpec {
        name: "Linear",
        args: &[pos("out", Kind::Features), named("bias", Kind::Bool, "true"), named("tie", Kind::LayerRef, "none")],
        doc_rule: "[in] → [out], or [T, in] → [T, out]",
        rule: Rule::Layer(dense::linear),
        example: "e.g. `Linear(10)` or `Linear(784 => 10)`",
        keeps_shape: false,
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
        doc_rule: "[C, H, W] → [out, H', W'], H' = floor((H + 2p - d(k-1) - 1)/s) + 1",
        rule: Rule::Layer(conv::conv2d),
        example: "e.g. `Conv2d(16, kernel = 3, padding = 1)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "MaxPool2d",
        args: &[
            pos("kernel", Kind::Size2),
            named("stride", Kind::Size2, "kernel"),
            named("padding", Kind::Pad, "0"),
            named("dilation", Kind::Size2, "1"),
        ],
        doc_rule: "[C, H, W] → [C, H', W'], H' = floor((H + 2p - d(k-1) - 1)/s) + 1",
        rule: Rule::Layer(conv::max_pool2d),
        example: "e.g. `MaxPool2d(2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "AvgPool2d",
        args: &[pos("kernel", Kind::Size2), named("stride", Kind::Size2, "kernel"), named("padding", Kind::Pad, "0")],
        doc_rule: "[C, H, W] → [C, H', W'], H' = floor((H + 2p - k)/s) + 1",
        rule: Rule::Layer(conv::avg_pool2d),
        example: "e.g. `AvgPool2d(2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "AdaptiveAvgPool2d",
        args: &[pos("size", Kind::Dims)],
        doc_rule: "[C, H, W] → [C, oh, ow]",
        rule: Rule::Layer(conv::adaptive_avg_pool2d),
        example: "e.g. `AdaptiveAvgPool2d(1)` or `AdaptiveAvgPool2d(7, 7)`",
        keeps_shape: false,
    },
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
        doc_rule: "[C, H, W] → [out, H', W'], H' = (H - 1)s - 2p + d(k-1) + output_padding + 1",
        rule: Rule::Layer(conv::conv_transpose2d),
        example: "e.g. `ConvTranspose2d(16, kernel = 3, stride = 2, padding = 1, output_padding = 1)`",
        keeps_shape: false,
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
        doc_rule: "[C, L] → [out, L'], L' = floor((L + 2p - d(k-1) - 1)/s) + 1",
        rule: Rule::Layer(conv1d::conv1d),
        example: "e.g. `Conv1d(16, kernel = 3, padding = same)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "MaxPool1d",
        args: &[
            pos("kernel", Kind::Size),
            named("stride", Kind::Size, "kernel"),
            named("padding", Kind::Count, "0"),
            named("dilation", Kind::Size, "1"),
        ],
        doc_rule: "[C, L] → [C, L'], L' = floor((L + 2p - d(k-1) - 1)/s) + 1",
        rule: Rule::Layer(conv1d::max_pool1d),
        example: "e.g. `MaxPool1d(2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "AvgPool1d",
        args: &[pos("kernel", Kind::Size), named("stride", Kind::Size, "kernel"), named("padding", Kind::Count, "0")],
        doc_rule: "[C, L] → [C, L'], L' = floor((L + 2p - k)/s) + 1",
        rule: Rule::Layer(conv1d::avg_pool1d),
        example: "e.g. `AvgPool1d(2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "GlobalAvgPool",
        args: NO_ARGS,
        doc_rule: "[C, H, W] → [C] (the mean of each channel)",
        rule: Rule::Layer(conv::global_avg_pool),
        example: SEE_DOCS,
        keeps_shape: false,
    },
    LayerSpec {
        name: "GlobalMaxPool",
        args: NO_ARGS,
        doc_rule: "[C, H, W] → [C] (the maximum of each channel)",
        rule: Rule::Layer(conv::global_max_pool),
        example: SEE_DOCS,
        keeps_shape: false,
    },
    LayerSpec {
        name: "Upsample",
        args: &[pos("scale", Kind::Size2), named("mode", Kind::Mode, "nearest")],
        doc_rule: "[C, H, W] → [C, H·sh, W·sw]",
        rule: Rule::Layer(conv::upsample),
        example: "e.g. `Upsample(2)` or `Upsample(2, mode = bilinear)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Flatten",
        args: NO_ARGS,
        doc_rule: "[d0, d1, ...] → [d0 · d1 · ...]",
        rule: Rule::Layer(reshape::flatten),
        example: SEE_DOCS,
        keeps_shape: false,
    },
    LayerSpec {
        name: "Reshape",
        args: &[pos("shape", Kind::Dims)],
        doc_rule: "any shape → the given shape (same element count; one -1 is inferred)",
        rule: Rule::Layer(reshape::reshape),
        example: "e.g. `Reshape(1, 28, 28)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Dropout",
        args: &[pos_opt("p", Kind::Prob, "0.5")],
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::dropout),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "BatchNorm1d",
        args: &[
            pos_opt("features", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("momentum", Kind::Prob, "0.1"),
        ],
        doc_rule: "[C] or [C, L] → the same shape",
        rule: Rule::Layer(norm::batch_norm1d),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "BatchNorm2d",
        args: &[
            pos_opt("features", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("momentum", Kind::Prob, "0.1"),
        ],
        doc_rule: "[C, H, W] → the same shape",
        rule: Rule::Layer(norm::batch_norm2d),
        example: SEE_DOCS,
        keeps_shape: false,
    },
    LayerSpec {
        name: "LayerNorm",
        args: &[
            pos_opt("shape", Kind::Dims, "last axis"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("affine", Kind::Bool, "true"),
        ],
        doc_rule: "[..., *shape] → the same shape",
        rule: Rule::Layer(norm::layer_norm),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "GroupNorm",
        args: &[
            pos("groups", Kind::Size),
            pos_opt("channels", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("affine", Kind::Bool, "true"),
        ],
        doc_rule: "[C, ...] → the same shape, groups divides C",
        rule: Rule::Layer(norm::group_norm),
        example: "e.g. `GroupNorm(4)` (the number of groups, a divisor of the channels)",
        keeps_shape: true,
    },
    LayerSpec {
        name: "InstanceNorm2d",
        args: &[
            pos_opt("features", Kind::Size, "inferred"),
            named("eps", Kind::PosFloat, "1e-5"),
            named("affine", Kind::Bool, "false"),
        ],
        doc_rule: "[C, H, W] → the same shape (each channel of each sample normalised over H·W)",
        rule: Rule::Layer(norm::instance_norm2d),
        example: SEE_DOCS,
        keeps_shape: false,
    },
    LayerSpec {
        name: "RmsNorm",
        args: &[
            pos_opt("shape", Kind::Dims, "last axis"),
            named("eps", Kind::PosFloat, "1e-6"),
            named("affine", Kind::Bool, "true"),
        ],
        doc_rule: "[..., *shape] → the same shape, x / √(mean(x²) + eps) · weight",
        rule: Rule::Layer(norm::rms_norm),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Embedding",
        args: &[pos("num", Kind::Size), pos("dim", Kind::Size), named("std", Kind::PosFloat, "1.0")],
        doc_rule: "[T] token indices → [T, dim]",
        rule: Rule::Layer(embedding::embedding),
        example: "e.g. `Embedding(1000, 64)` (vocabulary size, embedding size)",
        keeps_shape: false,
    },
    LayerSpec {
        name: "PositionalEmbedding",
        args: &[pos("block", Kind::Size), named("std", Kind::PosFloat, "0.02")],
        doc_rule: "[T, E] → [T, E] (adds a learned vector per position), T ≤ block",
        rule: Rule::Layer(embedding::positional_embedding),
        example: "e.g. `PositionalEmbedding(256)` (the longest sequence, the block length)",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Relu",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::relu),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Sigmoid",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::sigmoid),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Tanh",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::tanh),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Gelu",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::gelu),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "GeluTanh",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::gelu_tanh),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Silu",
        args: NO_ARGS,
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::silu),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "LeakyRelu",
        args: &[pos_opt("slope", Kind::Float, "0.01")],
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::leaky_relu),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Softmax",
        args: &[pos_opt("axis", Kind::Axis, "-1")],
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::softmax),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "LogSoftmax",
        args: &[pos_opt("axis", Kind::Axis, "-1")],
        doc_rule: ELEMENTWISE,
        rule: Rule::Layer(elementwise::log_softmax),
        example: SEE_DOCS,
        keeps_shape: true,
    },
    LayerSpec {
        name: "Residual",
        args: &[pos("layers", Kind::Layers), named("shortcut", Kind::Branch, "identity")],
        doc_rule: "x → shortcut(x) + layers(x), the shortcut the identity unless given; both branches produce the same shape",
        rule: Rule::Layer(block::residual),
        example: "e.g. `Residual(Linear(64), Relu, Linear(64))` or `Residual(Linear(32), Relu, Linear(32), shortcut = Linear(32))`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "MultiHeadAttention",
        args: &[pos("heads", Kind::Size), named("causal", Kind::Bool, "false")],
        doc_rule: "[T, E] → [T, E], E divisible by heads",
        rule: Rule::Layer(attention::multi_head_attention),
        example: "e.g. `MultiHeadAttention(8)` or `MultiHeadAttention(8, causal = true)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "CausalSelfAttention",
        args: &[pos("heads", Kind::Size), named("dropout", Kind::Prob, "0.0"), named("bias", Kind::Bool, "true")],
        doc_rule: "[T, E] → [T, E], E divisible by heads; position t attends to positions ≤ t",
        rule: Rule::Layer(attention::causal_self_attention),
        example: "e.g. `CausalSelfAttention(6, dropout = 0.2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "TransformerBlock",
        args: &[pos("heads", Kind::Size), named("dropout", Kind::Prob, "0.0"), named("bias", Kind::Bool, "true")],
        doc_rule: "[T, E] → [T, E], E divisible by heads; x + attn(ln_1(x)), then x + mlp(ln_2(x))",
        rule: Rule::Layer(attention::transformer_block),
        example: "e.g. `TransformerBlock(6, dropout = 0.2)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Lstm",
        args: RECURRENT_ARGS,
        doc_rule: RECURRENT_RULE,
        rule: Rule::Layer(recurrent::lstm),
        example: "e.g. `Lstm(128)` or `Lstm(64, layers = 2, bidirectional = true, return_sequences = false)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Gru",
        args: RECURRENT_ARGS,
        doc_rule: RECURRENT_RULE,
        rule: Rule::Layer(recurrent::gru),
        example: "e.g. `Gru(128)` or `Gru(64, layers = 2, bidirectional = true, return_sequences = false)`",
        keeps_shape: false,
    },
    LayerSpec {
        name: "Repeat",
        args: &[pos("n", Kind::Size), pos("layers", Kind::Layers)],
        doc_rule: "x → the layers applied n times in a row (n copies, each with its own parameters)",
        rule: Rule::Expand(block::repeat),
        example: "e.g. `Repeat(6, TransformerBlock(6))`",
        keeps_shape: false,
    },
];

pub fn find(name: &str) -> Option<&'static LayerSpec> {
    LAYERS.iter().find(|l| l.name == name)
}

/// The example of `layer`'s row, for hints.
pub fn example(layer: &str) -> &'static str {
    find(layer).map_or(SEE_DOCS, |l| l.example)
}

pub fn fmt_shape(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_layer_list;

    /// docs/DSL.md and README.md document every layer with the rule this table states.
    #[test]
    fn docs_state_every_layer_and_rule() {
        for (file, docs) in
            [("docs/DSL.md", include_str!("../../../docs/DSL.md")), ("README.md", include_str!("../../../README.md"))]
        {
            for l in super::LAYERS {
                assert!(docs.contains(&format!("`{}`", l.name)), "{file} does not mention {}", l.name);
                assert!(docs.contains(l.doc_rule), "{file} does not state the rule of {}: {}", l.name, l.doc_rule);
            }
        }
    }

    /// Every layer written in a row's example binds to that row: the hints show working code.
    #[test]
    fn every_example_binds() {
        for l in super::LAYERS {
            let written: Vec<&str> = l.example.split('`').skip(1).step_by(2).collect();
            assert!(l.example == super::SEE_DOCS || !written.is_empty(), "{}: {}", l.name, l.example);
            for w in written {
                let calls = parse_layer_list(w.parse().unwrap()).unwrap_or_else(|e| panic!("{w}: {e}"));
                assert_eq!(calls.len(), 1, "{w}");
                assert_eq!(calls[0].name, l.name, "the example of {} shows {w}", l.name);
                if let Err(e) = super::bind(l, &calls[0]) {
                    panic!("the example `{w}` of {} does not bind: {e}", l.name);
                }
            }
        }
    }
}
