//! The constructor expression of each analysed layer (`device`, `seed` and the tie and depth
//! locals of `new` are in scope): one arm per [`LayerKind`], so a new kind does not compile
//! until it is given its constructor here.

use proc_macro2::TokenStream;
use quote::quote;

use super::tokens::{depth_var, dims, lit, pair, seed, tie_var};
use crate::analyse::plan::{
    Attention, Conv1d, Conv1dPadding, Conv2d, ConvTranspose2d, LayerRef, Pair, Recurrent, UpsampleMode,
};
use crate::analyse::{fuse, Layer, LayerKind};

/// An expression that builds `layer`.
pub fn ctor(layer: &Layer) -> TokenStream {
    match &layer.kind {
        LayerKind::Linear { in_features, out_features, bias, tie, seed } => {
            linear(*in_features, *out_features, *bias, tie.as_ref(), *seed)
        }
        LayerKind::Conv2d(c) => conv2d(c),
        LayerKind::MaxPool2d { kernel, stride, padding, dilation } => {
            pool(quote!(MaxPool2d), &[*kernel, *stride, *padding, *dilation])
        }
        LayerKind::AvgPool2d { kernel, stride, padding } => pool(quote!(AvgPool2d), &[*kernel, *stride, *padding]),
        LayerKind::AdaptiveAvgPool2d { size } => {
            let size = pair(*size);
            quote!(::rumus::nn::AdaptiveAvgPool2d::new(#size))
        }
        LayerKind::ConvTranspose2d(c) => conv_transpose2d(c),
        LayerKind::Conv1d(c) => conv1d(c),
        LayerKind::MaxPool1d { kernel, stride, padding, dilation } => {
            let (k, s, p, d) = (lit(*kernel), lit(*stride), lit(*padding), lit(*dilation));
            quote!(::rumus::nn::MaxPool1d::new(#k, #s, #p, #d))
        }
        LayerKind::AvgPool1d { kernel, stride, padding } => {
            let (k, s, p) = (lit(*kernel), lit(*stride), lit(*padding));
            quote!(::rumus::nn::AvgPool1d::new(#k, #s, #p))
        }
        LayerKind::GlobalAvgPool => quote!(::rumus::nn::GlobalAvgPool),
        LayerKind::GlobalMaxPool => quote!(::rumus::nn::GlobalMaxPool),
        LayerKind::Upsample { scale, mode } => {
            let scale = pair(*scale);
            let mode = match mode {
                UpsampleMode::Nearest => quote!(::rumus::UpsampleMode::Nearest),
                UpsampleMode::Bilinear => quote!(::rumus::UpsampleMode::Bilinear),
            };
            quote!(::rumus::nn::Upsample::new(#scale, #mode))
        }
        LayerKind::Flatten => quote!(::rumus::nn::Flatten::new()),
        LayerKind::Reshape { shape } => {
            let shape = dims(shape);
            quote!(::rumus::nn::Reshape::new(&#shape))
        }
        LayerKind::Dropout { p, seed: k } => {
            let seed = seed(*k);
            quote!(::rumus::nn::Dropout::new(#p, #seed))
        }
        LayerKind::BatchNorm1d { features, eps, momentum } => {
            batch_norm(quote!(BatchNorm1d), *features, *eps, *momentum)
        }
        LayerKind::BatchNorm2d { features, eps, momentum } => {
            batch_norm(quote!(BatchNorm2d), *features, *eps, *momentum)
        }
        LayerKind::LayerNorm { shape, eps, affine } => {
            let shape = dims(shape);
            quote!(::rumus::nn::LayerNorm::new(device, &#shape, #eps, #affine)?)
        }
        LayerKind::GroupNorm { groups, channels, eps, affine } => {
            let (g, c) = (lit(*groups), lit(*channels));
            quote!(::rumus::nn::GroupNorm::new(device, #g, #c, #eps, #affine)?)
        }
        LayerKind::InstanceNorm2d { features, eps, affine } => {
            let c = lit(*features);
            quote!(::rumus::nn::InstanceNorm2d::new(device, #c, #eps, #affine)?)
        }
        LayerKind::RmsNorm { shape, eps, affine } => {
            let shape = dims(shape);
            quote!(::rumus::nn::RmsNorm::new(device, &#shape, #eps, #affine)?)
        }
        LayerKind::Embedding { num, dim, std, seed } => embedding(*num, *dim, *std, *seed),
        LayerKind::PositionalEmbedding { block, dim, std, seed: k } => {
            let (b, e, seed) = (lit(*block), lit(*dim), seed(*k));
            quote!(::rumus::nn::PositionalEmbedding::new(device, #b, #e, #std, #seed)?)
        }
        LayerKind::Relu => quote!(::rumus::nn::Relu),
        LayerKind::Sigmoid => quote!(::rumus::nn::Sigmoid),
        LayerKind::Tanh => quote!(::rumus::nn::Tanh),
        LayerKind::Gelu => quote!(::rumus::nn::Gelu),
        LayerKind::GeluTanh => quote!(::rumus::nn::GeluTanh),
        LayerKind::Silu => quote!(::rumus::nn::Silu),
        LayerKind::LeakyRelu { slope } => quote!(::rumus::nn::LeakyRelu { negative_slope: #slope }),
        LayerKind::Softmax { axis } => quote!(::rumus::nn::Softmax { axis: #axis }),
        LayerKind::LogSoftmax { axis } => quote!(::rumus::nn::LogSoftmax { axis: #axis }),
        LayerKind::Residual { layers, shortcut } => {
            let inner = sequential(layers);
            match shortcut {
                None => quote!(::rumus::nn::Residual::new(#inner)),
                Some(side) => {
                    let side = sequential(side);
                    quote!(::rumus::nn::Residual::with_shortcut(#inner, #side))
                }
            }
        }
        LayerKind::MultiHeadAttention { embed, heads, causal, seed: k } => {
            let (e, h, seed) = (lit(*embed), lit(*heads), seed(*k));
            let causal = causal.then(|| quote!(.causal(true)));
            quote!(::rumus::nn::MultiHeadAttention::new(device, #e, #h, #seed)? #causal)
        }
        LayerKind::CausalSelfAttention(a) => attention(quote!(CausalSelfAttention), a),
        LayerKind::TransformerBlock(a) => attention(quote!(TransformerBlock), a),
        LayerKind::Lstm(r) => recurrent(quote!(Lstm), r),
        LayerKind::Gru(r) => recurrent(quote!(Gru), r),
    }
}

/// A `Sequential` of `layers` in builder style, a batch norm or a `Residual` and the `Relu`
/// after it appended with one `with_relu` (run as one fused op: [`fuse::steps`]).
fn sequential(layers: &[Layer]) -> TokenStream {
    let appends = fuse::steps(layers).into_iter().map(|step| {
        let ctor = ctor(step.layer);
        if step.with_relu {
            quote!(.with_relu(#ctor))
        } else {
            quote!(.with(#ctor))
        }
    });
    quote!(::rumus::nn::Sequential::new() #(#appends)*)
}

/// `MaxPool2d::new(kernel, stride, padding[, dilation])`.
fn pool(ty: TokenStream, pairs: &[Pair]) -> TokenStream {
    let pairs = pairs.iter().map(|p| pair(*p));
    quote!(::rumus::nn::#ty::new(#(#pairs),*))
}

fn batch_norm(ty: TokenStream, features: usize, eps: f32, momentum: f32) -> TokenStream {
    let c = lit(features);
    quote!(::rumus::nn::#ty::new(device, #c, #eps, #momentum)?)
}

/// A Linear; a tied one takes the Embedding's parameter itself (one storage), bound earlier in
/// `new`.
fn linear(i: usize, o: usize, bias: bool, tie: Option<&LayerRef>, k: u64) -> TokenStream {
    let (i, o, seed) = (lit(i), lit(o), seed(k));
    match tie {
        Some(source) => {
            let var = tie_var(source);
            quote!({
                let mut layer = ::rumus::nn::Linear::new(device, #i, #o, #bias, #seed)?;
                layer.weight = ::core::clone::Clone::clone(&#var);
                layer
            })
        }
        None => quote!(::rumus::nn::Linear::new(device, #i, #o, #bias, #seed)?),
    }
}

fn conv2d(c: &Conv2d) -> TokenStream {
    let (ci, co, g, seed) = (lit(c.in_channels), lit(c.out_channels), lit(c.groups), seed(c.seed));
    let (kt, st, pt, dt) = (pair(c.kernel), pair(c.stride), pair(c.padding), pair(c.dilation));
    let bias = c.bias;
    quote!(::rumus::nn::Conv2d::new(
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
    )?)
}

fn conv_transpose2d(c: &ConvTranspose2d) -> TokenStream {
    let (ci, co, g, seed) = (lit(c.in_channels), lit(c.out_channels), lit(c.groups), seed(c.seed));
    let (kt, st, pt, opt, dt) =
        (pair(c.kernel), pair(c.stride), pair(c.padding), pair(c.output_padding), pair(c.dilation));
    let bias = c.bias;
    quote!(::rumus::nn::ConvTranspose2d::new(
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
    )?)
}

fn conv1d(c: &Conv1d) -> TokenStream {
    let (ci, co, k, s, d, g, seed) = (
        lit(c.in_channels),
        lit(c.out_channels),
        lit(c.kernel),
        lit(c.stride),
        lit(c.dilation),
        lit(c.groups),
        seed(c.seed),
    );
    let padding = match c.padding {
        Conv1dPadding::Same => quote!(::rumus::Conv1dPadding::Same),
        Conv1dPadding::Explicit(p) => {
            let p = lit(p);
            quote!(::rumus::Conv1dPadding::Explicit(#p))
        }
    };
    let bias = c.bias;
    quote!(::rumus::nn::Conv1d::new(
        device,
        ::rumus::nn::Conv1dConfig {
            in_channels: #ci,
            out_channels: #co,
            kernel: #k,
            stride: #s,
            padding: #padding,
            dilation: #d,
            groups: #g,
            bias: #bias,
        },
        #seed,
    )?)
}

/// `Embedding::new` is `with_std(.., 1.0, ..)`, PyTorch's N(0, 1).
fn embedding(num: usize, dim: usize, std: Option<f32>, k: u64) -> TokenStream {
    let (n, d, seed) = (lit(num), lit(dim), seed(k));
    match std {
        None => quote!(::rumus::nn::Embedding::new(device, #n, #d, #seed)?),
        Some(std) => quote!(::rumus::nn::Embedding::with_std(device, #n, #d, #std, #seed)?),
    }
}

/// `CausalSelfAttention` or `TransformerBlock`, with the model's attention depth.
fn attention(ty: TokenStream, a: &Attention) -> TokenStream {
    let (e, h, seed, depth) = (lit(a.embed), lit(a.heads), seed(a.seed), depth_var());
    let (dropout, bias) = (a.dropout, a.bias);
    quote!(::rumus::nn::#ty::new(device, #e, #h, #dropout, #bias, #depth, #seed)?)
}

/// `Lstm` or `Gru` with its `RecurrentConfig`.
fn recurrent(ty: TokenStream, r: &Recurrent) -> TokenStream {
    let (f, h, l, seed) = (lit(r.features), lit(r.hidden), lit(r.layers), seed(r.seed));
    let (bidirectional, dropout, return_sequences) = (r.bidirectional, r.dropout, r.return_sequences);
    quote!(::rumus::nn::#ty::new(
        device,
        #f,
        #h,
        ::rumus::nn::RecurrentConfig {
            layers: #l,
            bidirectional: #bidirectional,
            dropout: #dropout,
            return_sequences: #return_sequences,
        },
        #seed,
    )?)
}
