//! PyTorch's and Keras's names for the built-in layers and their arguments, for hints that
//! translate them.

use crate::parse::LayerCall;

/// PyTorch's and Keras's names for the arguments of the built-in layers, as
/// `(layers, foreign name, rumus argument, how to write it)`; `*` matches every layer.
pub const ARGS: &[(&[&str], &str, &str, &str)] = &[
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
    (&["Lstm", "Gru"], "hidden_size", "hidden", "`Lstm(128)`; the input features are inferred"),
    (&["Lstm", "Gru"], "units", "hidden", "`Lstm(128)`"),
    (&["Lstm", "Gru"], "num_layers", "layers", "`layers = 2`"),
    (&["Linear"], "tied", "tie", "`tie = embed.0`"),
    (&["Linear"], "tie_weights", "tie", "`tie = embed.0`"),
    (&["Repeat"], "times", "n", "`Repeat(6, TransformerBlock(6))`"),
    (&["BatchNorm1d", "BatchNorm2d"], "num_features", "features", "`BatchNorm2d` (inferred) or `BatchNorm2d(c)`"),
    (
        &["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "InstanceNorm2d", "RmsNorm"],
        "epsilon",
        "eps",
        "`eps = 1e-5`",
    ),
    (&["LayerNorm"], "normalized_shape", "shape", "`LayerNorm` (the last axis) or `LayerNorm(d0, d1)`"),
    (&["LayerNorm", "RmsNorm"], "elementwise_affine", "affine", "`affine = false`"),
    (&["RmsNorm"], "normalized_shape", "shape", "`RmsNorm` (the last axis) or `RmsNorm(d0, d1)`"),
    (&["GroupNorm"], "num_groups", "groups", "`GroupNorm(4)`; the channels are inferred"),
    (&["GroupNorm"], "num_channels", "channels", "`GroupNorm(4)` (inferred) or `GroupNorm(4, c)`"),
    (&["InstanceNorm2d"], "num_features", "features", "`InstanceNorm2d` (inferred) or `InstanceNorm2d(c)`"),
    (&["LeakyRelu"], "negative_slope", "slope", "`LeakyRelu(0.2)`"),
    (&["LeakyRelu"], "alpha", "slope", "`LeakyRelu(0.2)`"),
    (&["Softmax", "LogSoftmax"], "dim", "axis", "`Softmax(axis = -1)`"),
    (&["AdaptiveAvgPool2d"], "output_size", "size", "`AdaptiveAvgPool2d(1)`"),
];

/// PyTorch's positional order where it differs from ours: `Linear(784, 10)` is (in, out) there.
pub fn positional(layer: &str, call: &LayerCall) -> Option<String> {
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
        ("Lstm" | "Gru", [f, h, ..]) => Some(format!(
            "PyTorch's `{}({f}, {h})` (input_size, hidden_size) is `{layer}({h})` here; the input features are inferred",
            layer.to_uppercase()
        )),
        ("CausalSelfAttention" | "TransformerBlock", [e, h]) => Some(format!(
            "a `(n_embd, n_head)` pair such as `{layer}({e}, {h})` is `{layer}({h})` here; the embedding size is inferred"
        )),
        _ => None,
    }
}

/// `did you mean `kernel`? (PyTorch's `kernel_size` is `kernel` here: `kernel = 3`)`.
pub fn argument(layer: &str, name: &str) -> Option<String> {
    ARGS.iter().find(|(layers, foreign, _, _)| *foreign == name && layers.contains(&layer)).map(
        |(_, foreign, ours, example)| {
            format!("did you mean `{ours}`? (`{foreign}` in PyTorch or Keras is `{ours}` here: {example})")
        },
    )
}

/// Keras's and PyTorch's names of built-in layers that are not close in spelling.
pub const LAYERS: &[(&str, &str)] = &[
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
    ("LSTM", "Lstm"),
    ("GRU", "Gru"),
    ("RMSNorm", "RmsNorm"),
    ("GroupNormalization", "GroupNorm"),
];

#[cfg(test)]
mod tests {
    /// Every foreign name maps to an argument its layers really have.
    #[test]
    fn foreign_names_map_to_real_arguments() {
        for (layers, foreign, ours, _) in super::ARGS {
            for l in *layers {
                let spec = crate::spec::find(l).unwrap_or_else(|| panic!("{l} is not a layer"));
                assert!(spec.args.iter().any(|a| a.name == *ours), "{l} has no `{ours}` (for `{foreign}`)");
                assert!(spec.args.iter().all(|a| a.name != *foreign), "{l} already takes `{foreign}`");
            }
        }
    }

    /// Every foreign layer name points to a built-in layer, and is not one itself.
    #[test]
    fn foreign_layers_map_to_real_layers() {
        for (foreign, ours) in super::LAYERS {
            assert!(crate::spec::find(ours).is_some(), "`{foreign}` maps to {ours}, which is not a layer");
            assert!(crate::spec::find(foreign).is_none(), "`{foreign}` is a layer of ours");
        }
    }
}
