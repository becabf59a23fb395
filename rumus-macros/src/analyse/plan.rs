//! The typed plan that analysis hands to generation: every layer as a [`LayerKind`] with its
//! resolved arguments (inferred sizes filled in, seeds assigned), its shapes and parameter counts,
//! and per field and per model the shapes and totals. Nothing here is code to emit.

use std::fmt;

use syn::Error;

use crate::parse::model::NestedInfo;
use crate::spec::Shape;

/// A pair of sizes `(h, w)`.
pub type Pair = (usize, usize);

/// A layer of the model named as `field.index` (what `Linear(.., tie = embed.0)` shares).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRef {
    pub field: String,
    pub index: usize,
}

impl fmt::Display for LayerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.field, self.index)
    }
}

/// What a layer is, with every size the runtime constructor takes. `seed` is the index of the
/// layer's seed, derived from the model's seed in declaration order.
#[derive(Clone, Debug)]
pub enum LayerKind {
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
        tie: Option<LayerRef>,
        seed: u64,
    },
    Conv2d(Conv2d),
    MaxPool2d {
        kernel: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
    },
    AvgPool2d {
        kernel: Pair,
        stride: Pair,
        padding: Pair,
    },
    AdaptiveAvgPool2d {
        size: Pair,
    },
    ConvTranspose2d(ConvTranspose2d),
    Conv1d(Conv1d),
    MaxPool1d {
        kernel: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
    },
    AvgPool1d {
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    GlobalAvgPool,
    GlobalMaxPool,
    Upsample {
        scale: Pair,
        mode: UpsampleMode,
    },
    Flatten,
    Reshape {
        shape: Shape,
    },
    Dropout {
        p: f32,
        seed: u64,
    },
    BatchNorm1d {
        features: usize,
        eps: f32,
        momentum: f32,
    },
    BatchNorm2d {
        features: usize,
        eps: f32,
        momentum: f32,
    },
    LayerNorm {
        shape: Shape,
        eps: f32,
        affine: bool,
    },
    GroupNorm {
        groups: usize,
        channels: usize,
        eps: f32,
        affine: bool,
    },
    InstanceNorm2d {
        features: usize,
        eps: f32,
        affine: bool,
    },
    RmsNorm {
        shape: Shape,
        eps: f32,
        affine: bool,
    },
    /// `std: None` is PyTorch's N(0, 1) (`Embedding::new`).
    Embedding {
        num: usize,
        dim: usize,
        std: Option<f32>,
        seed: u64,
    },
    PositionalEmbedding {
        block: usize,
        dim: usize,
        std: f32,
        seed: u64,
    },
    Relu,
    Sigmoid,
    Tanh,
    Gelu,
    GeluTanh,
    Silu,
    LeakyRelu {
        slope: f32,
    },
    Softmax {
        axis: isize,
    },
    LogSoftmax {
        axis: isize,
    },
    /// `shortcut: None` is the identity.
    Residual {
        layers: Vec<Layer>,
        shortcut: Option<Vec<Layer>>,
    },
    MultiHeadAttention {
        embed: usize,
        heads: usize,
        causal: bool,
        seed: u64,
    },
    CausalSelfAttention(Attention),
    TransformerBlock(Attention),
    Lstm(Recurrent),
    Gru(Recurrent),
}

/// A `Conv2d`'s configuration (`rumus::nn::Conv2dConfig`).
#[derive(Clone, Debug)]
pub struct Conv2d {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: Pair,
    pub stride: Pair,
    pub padding: Pair,
    pub dilation: Pair,
    pub groups: usize,
    pub bias: bool,
    pub seed: u64,
}

/// A `ConvTranspose2d`'s configuration (`rumus::nn::ConvTranspose2dConfig`).
#[derive(Clone, Debug)]
pub struct ConvTranspose2d {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: Pair,
    pub stride: Pair,
    pub padding: Pair,
    pub output_padding: Pair,
    pub dilation: Pair,
    pub groups: usize,
    pub bias: bool,
    pub seed: u64,
}

/// A `Conv1d`'s configuration (`rumus::nn::Conv1dConfig`).
#[derive(Clone, Debug)]
pub struct Conv1d {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: Conv1dPadding,
    pub dilation: usize,
    pub groups: usize,
    pub bias: bool,
    pub seed: u64,
}

/// A `Conv1d`'s padding (`rumus::Conv1dPadding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv1dPadding {
    /// PyTorch's `padding='same'`: d·(k-1) in all, the odd one on the right.
    Same,
    /// The same number of zeros on both sides.
    Explicit(usize),
}

/// How `Upsample` fills the new pixels (`rumus::UpsampleMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsampleMode {
    Nearest,
    /// `align_corners = false`, as PyTorch's default.
    Bilinear,
}

/// The arguments of `CausalSelfAttention` and `TransformerBlock`.
#[derive(Clone, Debug)]
pub struct Attention {
    pub embed: usize,
    pub heads: usize,
    pub dropout: f32,
    pub bias: bool,
    pub seed: u64,
}

/// The arguments of `Lstm` and `Gru` (`rumus::nn::RecurrentConfig` and the sizes), the input
/// features inferred.
#[derive(Clone, Debug)]
pub struct Recurrent {
    pub features: usize,
    pub hidden: usize,
    pub layers: usize,
    pub bidirectional: bool,
    pub dropout: f32,
    pub return_sequences: bool,
    pub seed: u64,
}

/// One analysed layer.
#[derive(Clone, Debug)]
pub struct Layer {
    pub kind: LayerKind,
    /// Its row's name (`Linear`), the type column of `summary()`.
    pub type_name: &'static str,
    pub input: Shape,
    pub output: Shape,
    pub trainable: u128,
    /// Non-trainable scalars (batch-norm running statistics).
    pub buffers: u128,
    /// How messages and `summary()` name it, with inferred sizes: `Linear(400 => 120)`.
    pub display: String,
    /// Flatten and Reshape: later messages show the shape they received, `(from [16, 4, 4])`.
    pub shows_from: bool,
}

impl Layer {
    /// An `Embedding`'s weight shape `[num, dim]`, which a `Linear(.., tie = ..)` may share.
    pub fn embedding(&self) -> Option<(usize, usize)> {
        match self.kind {
            LayerKind::Embedding { num, dim, .. } => Some((num, dim)),
            _ => None,
        }
    }

    /// The layer whose weight a tied `Linear` shares (and where that weight is counted).
    pub fn tied_to(&self) -> Option<&LayerRef> {
        match &self.kind {
            LayerKind::Linear { tie, .. } => tie.as_ref(),
            _ => None,
        }
    }
}

pub enum FieldBody {
    Layers(Vec<Layer>),
    /// A nested #[model]: its path as written, what its callback reported, its seed index.
    Nested {
        path: syn::Path,
        info: NestedInfo,
        seed: u64,
    },
}

pub struct FieldPlan {
    pub input: Shape,
    pub output: Shape,
    pub body: FieldBody,
}

pub struct Plan {
    pub input: Shape,
    pub output: Shape,
    pub fields: Vec<FieldPlan>,
    pub trainable: u128,
    pub buffers: u128,
    /// The model reads its input as token indices (its first layer is an Embedding), so it
    /// cannot be nested after a layer.
    pub indices: bool,
    /// Every Embedding whose weight a `Linear(.., tie = ..)` shares.
    pub tied: Vec<LayerRef>,
    /// `CausalSelfAttention` and `TransformerBlock` layers of this model (each `Repeat` copy
    /// counted, nested models not): the `depth` their constructors take.
    pub attention_layers: usize,
}

/// Why [`super::plan`] stopped, and what it knew by then (the dummies of a failed model use it).
#[derive(Debug)]
pub struct Stop {
    /// `None` when a nested model has an error of its own, reported where that model is.
    pub error: Option<Error>,
    /// `(input, output)` of the fields planned before the stop.
    pub done: Vec<(Shape, Shape)>,
    /// The input of the field it stopped at.
    pub next_input: Option<Shape>,
}
