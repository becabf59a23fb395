//! The walk of shape inference: from a field's input shape through its layers, each layer's
//! rule (the function its row of [`crate::spec::LAYERS`] names) giving the typed [`Layer`] or an
//! error spanned on the offending layer or argument that names the layer, the shape it needs, the
//! shape it got and a hint. [`Producer`] says what made the shape a layer receives, for messages.
//!
//! Errors are spanned on the user's tokens, which the parsed calls and bound arguments carry
//! (`LayerCall::tokens`, [`Bound::tokens_or`]); nothing else here is tokens.

use proc_macro2::TokenStream;
use syn::Error;

use super::plan::{Layer, LayerKind, LayerRef};
use crate::parse::{LayerCall, Result};
use crate::spec::{self, fmt_shape, Bound, LayerSpec, Rule, Shape, MAX_DIM};
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
    pub fn got_features(&self) -> String {
        match self.shape.as_slice() {
            [n] => self.phrase(&n.to_string()),
            _ => format!("{} ({} features on the last axis)", self.got(), self.shape.last().copied().unwrap_or(0)),
        }
    }

    /// `Flatten produces 256 elements (from [16, 4, 4])`, `the model input is [10] (10 elements)`.
    pub fn got_elements(&self) -> String {
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

/// What a list of layers gives: each layer, and the producer of what follows.
pub type Expanded = (Vec<Layer>, Producer);

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
    next_seed: u64,
    /// The field being inferred.
    pub field: String,
    /// Every field of the model in order, with whether it is a `layers![..]` list.
    pub fields: Vec<(String, bool)>,
    /// Nesting inside `Residual` (0: directly in a field's list).
    nesting: usize,
    /// The layers inferred so far directly in a field's list.
    pub top: Vec<TopLayer>,
    /// Every Embedding a Linear ties to.
    pub tied: Vec<LayerRef>,
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

    /// The next seed index: each layer that draws random numbers takes one, in order.
    pub fn seed(&mut self) -> u64 {
        let k = self.next_seed;
        self.next_seed += 1;
        k
    }

    /// Runs `f` on layers nested in a block (`Residual`), which `tie` cannot name.
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Ctx) -> T) -> T {
        self.nesting += 1;
        let out = f(self);
        self.nesting -= 1;
        out
    }
}

/// Where a shape rule applies: the call as written, its bound arguments, what it receives.
pub struct Site<'a> {
    pub spec: &'static LayerSpec,
    pub call: &'a LayerCall,
    pub args: &'a Bound,
    pub input: &'a Producer,
}

impl Site<'_> {
    /// A layer of `kind` producing `output`, without parameters, shown as written.
    pub fn layer(&self, kind: LayerKind, output: Shape) -> Layer {
        Layer {
            kind,
            type_name: self.spec.name,
            input: self.input.shape.clone(),
            output,
            trainable: 0,
            buffers: 0,
            display: self.call.to_string(),
            shows_from: false,
        }
    }

    /// A layer of `kind` whose output has the input's shape.
    pub fn same_shape(&self, kind: LayerKind) -> Layer {
        self.layer(kind, self.input.shape.clone())
    }

    /// The input shape.
    pub fn shape(&self) -> &Shape {
        &self.input.shape
    }

    /// The tokens of argument `name` (for spans), or the whole call's when it was defaulted.
    pub fn arg_tokens(&self, name: &str) -> &TokenStream {
        self.args.tokens_or(name, &self.call.tokens)
    }
}

/// A spanned error on `tokens` (the user's, so rustc underlines them).
pub fn err(tokens: impl quote::ToTokens, msg: String) -> Error {
    Error::new_spanned(tokens, msg)
}

/// Runs a layer list from `input`, returning each layer (a `Repeat` gives one per layer of each
/// copy) and what the list produces.
pub fn infer_list(layers: &[LayerCall], input: Producer, ctx: &mut Ctx) -> Result<Expanded> {
    let mut prod = input;
    let mut outs = Vec::new();
    for (i, call) in layers.iter().enumerate() {
        let step = match spec::find(&call.name.to_string()) {
            Some(spec @ LayerSpec { rule: Rule::Expand(expand), .. }) => {
                spec::bind(spec, call).and_then(|args| expand(&Site { spec, call, args: &args, input: &prod }, ctx))
            }
            _ => infer_one(call, &prod, ctx),
        };
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

/// One layer that is not expanded: its result and the producer of the next layer's input.
fn infer_one(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<Expanded> {
    ctx.layer_count += 1;
    if ctx.layer_count > MAX_LAYERS {
        return Err(err(
            call,
            format!("the model expands to more than {MAX_LAYERS} layers at {call}, more than #[model] builds\nhint: use fewer `Repeat` copies"),
        ));
    }
    let out = infer_layer(call, prod, ctx)?;
    if let Some(d) = out.output.iter().find(|d| **d > MAX_DIM) {
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
            embedding: out.embedding(),
        });
    }
    let from = if out.shows_from { Some(out.input.clone()) } else { None };
    let next = Producer::output(out.display.clone(), out.output.clone(), from);
    Ok((vec![out], next))
}

/// Applies one layer's rule, the function its row of the table names.
fn infer_layer(call: &LayerCall, prod: &Producer, ctx: &mut Ctx) -> Result<Layer> {
    let spec = lookup(call)?;
    let args = spec::bind(spec, call)?;
    let site = Site { spec, call, args: &args, input: prod };
    match spec.rule {
        Rule::Layer(rule) => rule(&site, ctx),
        // `infer_list` expands these in place, so they never get here.
        Rule::Expand(_) => {
            Err(err(call, format!("layer `{}` is not expanded in place (bug in rumus-macros)", spec.name)))
        }
    }
}

/// The table entry for `call`, or an unknown-layer error with a suggestion.
fn lookup(call: &LayerCall) -> Result<&'static LayerSpec> {
    let name = call.name.to_string();
    spec::find(&name).ok_or_else(|| {
        let foreign = spec::foreign::LAYERS.iter().find(|(f, _)| *f == name).map(|(_, ours)| *ours);
        let hint =
            match foreign.or_else(|| did_you_mean(&name, spec::LAYERS.iter().map(|l| l.name))).and_then(spec::find) {
                Some(s) => format!("did you mean `{}`? ({}: {})", s.name, s.name, s.doc_rule),
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
    for inner in b.all_layers() {
        if let Err(e) = check_call(inner) {
            match &mut result {
                Ok(()) => result = Err(e),
                Err(all) => all.combine(e),
            }
        }
    }
    result
}

/// `1 channel`, `6 channels`.
pub fn count(n: usize, unit: &str) -> String {
    if n == 1 {
        format!("{n} {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

pub fn numel(s: &[usize]) -> u128 {
    s.iter().fold(1u128, |acc, d| acc.saturating_mul(*d as u128))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_layer_list;

    fn run(src: &str, input: &[usize]) -> Result<Expanded> {
        let layers = parse_layer_list(src.parse().unwrap())?;
        infer_list(&layers, Producer::input("the model input", input.to_vec()), &mut Ctx::default())
    }

    fn shapes(src: &str, input: &[usize]) -> Vec<Shape> {
        run(src, input).unwrap().0.into_iter().map(|o| o.output).collect()
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
        let s: Vec<Shape> = outs.iter().map(|o| o.output.clone()).collect();
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
    fn group_instance_and_rms_norms_keep_the_shape_and_count_pytorch_parameters() {
        // sum(p.numel() for p in torch.nn.GroupNorm(4, 16).parameters()) == 32
        let (outs, last) = run(
            "GroupNorm(4), GroupNorm(2, 16, affine = false), InstanceNorm2d, InstanceNorm2d(16, affine = true)",
            &[16, 5, 6],
        )
        .unwrap();
        assert_eq!(last.shape, vec![16, 5, 6]);
        assert_eq!(outs.iter().map(|o| o.trainable).collect::<Vec<_>>(), [32, 0, 0, 32]);
        assert!(matches!(outs[0].kind, LayerKind::GroupNorm { groups: 4, channels: 16, affine: true, .. }));
        assert_eq!(shapes("GroupNorm(3)", &[6, 10]), [vec![6, 10]]);
        // sum(p.numel() for p in torch.nn.RMSNorm([4, 8]).parameters()) == 32
        let (outs, _) = run("RmsNorm, RmsNorm(4, 8, eps = 1e-5), RmsNorm(affine = false)", &[4, 8]).unwrap();
        assert_eq!(outs.iter().map(|o| o.trainable).collect::<Vec<_>>(), [8, 32, 0]);
        assert!(matches!(&outs[0].kind, LayerKind::RmsNorm { shape, eps, .. } if shape == &[8] && *eps == 1e-6));
        assert_eq!(
            message("GroupNorm(3)", &[16, 4, 4]),
            "GroupNorm(3) splits the channels into 3 groups of equal size, but 3 does not divide the 16 channels: the model input is [16, 4, 4]\nhint: choose groups dividing 16 (1, 2, 4, 8, 16)"
        );
        assert!(message("GroupNorm(4, 8)", &[16, 4, 4]).contains("expects 8 channels"));
        assert!(message("InstanceNorm2d", &[16, 4]).contains("use `GroupNorm(C)`"));
        assert!(message("InstanceNorm2d(8)", &[16, 4, 4]).contains("`InstanceNorm2d(16)`"));
        assert!(message("RmsNorm(4)", &[4, 8]).contains("write `RmsNorm` to normalize the last axis, or `RmsNorm(8)`"));
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
        assert!(matches!(outs[5].kind, LayerKind::MultiHeadAttention { causal: true, embed: 48, heads: 4, .. }));
        assert!(matches!(outs[0].kind, LayerKind::Embedding { std: Some(s), .. } if s == 0.02));
        // Without `std`, PyTorch's N(0, 1) through `Embedding::new`.
        assert!(matches!(run("Embedding(84, 48)", &[32]).unwrap().0[0].kind, LayerKind::Embedding { std: None, .. }));
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
        let seeds: Vec<u64> = outs
            .iter()
            .filter_map(|o| match o.kind {
                LayerKind::Linear { seed, .. } | LayerKind::Embedding { seed, .. } => Some(seed),
                _ => None,
            })
            .collect();
        assert_eq!(seeds, (0..5).collect::<Vec<u64>>(), "a seed per layer, in order");
        // Shapes flow through every copy: the second copy gets the first one's output.
        let m = message("Embedding(10, 8), Repeat(2, Linear(8 => 4))", &[4]);
        assert!(m.contains("Linear(8 => 4) expects 8 input features, but Linear(8 => 4) produces [4, 4]"), "{m}");
        assert!(m.contains("in copy 2 of 2 of the Repeat"), "{m}");
        assert!(message("Repeat(0, Relu)", &[4]).starts_with("Repeat(0, ..) would repeat its layers 0 times"));
        assert!(message("Repeat(4097, Relu)", &[4]).contains("more than 4096 layers"));
        assert!(message("Repeat(65, Repeat(64, Relu))", &[4]).contains("more than 4096 layers"));
    }

    /// ResNet's downsampling block on [4, 9, 9]: 3×3 stride 2 and 3×3 convolutions with batch
    /// norms, a 1×1 stride-2 projection and batch norm beside them.
    const DOWN: &str = "Residual(Conv2d(8, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu, Conv2d(8, 3, padding = 1, bias = false), BatchNorm2d, shortcut = (Conv2d(8, 1, stride = 2, bias = false), BatchNorm2d)), Relu";

    #[test]
    fn residual_shortcut_projects_the_input_beside_the_layers() {
        let (outs, last) = run(DOWN, &[4, 9, 9]).unwrap();
        assert_eq!(last.shape, vec![8, 5, 5]);
        assert_eq!(outs.len(), 2, "the block is one layer, its Relu another");
        // sum(p.numel()) of Conv2d(4, 8, 3), BatchNorm2d(8), Conv2d(8, 8, 3), BatchNorm2d(8),
        // Conv2d(4, 8, 1), BatchNorm2d(8): 288 + 16 + 576 + 16 + 32 + 16.
        assert_eq!((outs[0].trainable, outs[0].buffers), (944, 48));
        let LayerKind::Residual { layers, shortcut: Some(side) } = &outs[0].kind else { panic!("{:?}", outs[0].kind) };
        assert_eq!((layers.len(), side.len()), (5, 2));
        let seed = |l: &Layer| match &l.kind {
            LayerKind::Conv2d(c) => (c.in_channels, c.kernel, c.stride, c.seed),
            other => panic!("{other:?}"),
        };
        // Seeds in order: the layers first, then the shortcut.
        assert_eq!(seed(&layers[0]), (4, (3, 3), (2, 2), 0));
        assert_eq!(seed(&layers[3]), (8, (3, 3), (1, 1), 1));
        assert_eq!(seed(&side[0]), (4, (1, 1), (2, 2), 2));
        assert!(
            outs[0].display.ends_with(
                "BatchNorm2d(8), shortcut = (Conv2d(4 => 8, kernel = 1, stride = 2, bias = false), BatchNorm2d(8)))"
            ),
            "{}",
            outs[0].display
        );
        // One layer needs no parentheses; a block without a shortcut is the identity's.
        let (outs, last) = run("Residual(Linear(32), Relu, Linear(32), shortcut = Linear(32))", &[16]).unwrap();
        assert_eq!((last.shape, outs[0].trainable), (vec![32], 3 * (16 * 32 + 32) + 32 * 32 - 16 * 32));
        assert!(matches!(&run("Residual(Relu)", &[16]).unwrap().0[0].kind, LayerKind::Residual { shortcut: None, .. }));
    }

    #[test]
    fn residual_branches_must_produce_the_same_shape() {
        let m =
            message(&DOWN.replace("Conv2d(8, 1, stride = 2, bias = false)", "Conv2d(8, 1, bias = false)"), &[4, 9, 9]);
        assert_eq!(
            m,
            "Residual adds its shortcut's output to its layers' output, so both must produce the same shape, but the layers' last layer BatchNorm2d(8) produces [8, 5, 5], and the shortcut's last layer BatchNorm2d(8) produces [8, 9, 9]\nhint: the shortcut must turn the block's input [4, 9, 9] into [8, 5, 5], e.g. `shortcut = (Conv2d(8, 1, stride = 2, bias = false), BatchNorm2d)`"
        );
        // Without a shortcut, the hint offers one.
        let m = message("Residual(Conv2d(8, 3, stride = 2, padding = 1), Relu)", &[4, 9, 9]);
        assert!(m.starts_with("Residual adds its input to its layers' output, so the layers must keep the shape [4, 9, 9], but its last layer Relu produces [8, 5, 5]"), "{m}");
        assert!(m.ends_with("or give it a projection shortcut that produces [8, 5, 5], e.g. `shortcut = (Conv2d(8, 1, stride = 2, bias = false), BatchNorm2d)`"), "{m}");
        let m = message("Residual(Linear(8), shortcut = Linear(4))", &[6, 16]);
        assert!(m.contains("and the shortcut's last layer Linear(16 => 4) produces [6, 4]\nhint: the shortcut must turn the block's input [6, 16] into [6, 8], e.g. `shortcut = Linear(8)`"), "{m}");
        let m = message("Residual(Flatten, shortcut = Relu)", &[2, 3]);
        assert!(m.ends_with("hint: end the shortcut with a layer that produces [6]"), "{m}");
        // Errors inside the shortcut name its layer and what it receives.
        let m = message("Residual(Linear(8), shortcut = (Linear(4 => 8)))", &[16]);
        assert!(m.starts_with("Linear(4 => 8) expects 4 input features, but the input of Residual is 16"), "{m}");
    }

    /// docs/DSL.md quotes the error of tests/ui/fail/residual_shortcut_mismatch.rs as written.
    #[test]
    fn docs_quote_the_shortcut_mismatch() {
        let m = message(
            "Residual(Conv2d(128, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu, Conv2d(128, 3, padding = 1, bias = false), BatchNorm2d, shortcut = (Conv2d(128, 1, bias = false), BatchNorm2d))",
            &[64, 32, 32],
        );
        let (first, hint) = m.split_once('\n').expect("a hint");
        let quoted = format!("  error: {first}\n         {hint}\n");
        assert!(include_str!("../../../docs/DSL.md").contains(&quoted), "docs/DSL.md should quote:\n{quoted}");
    }

    #[test]
    fn residual_shortcut_arguments_are_checked() {
        let m = message("Residual(Relu, shortcut = ())", &[4]);
        assert!(m.starts_with("argument `shortcut` of Residual has no layers"), "{m}");
        let m = message("Residual(Relu, shortcut = (Relu, 3))", &[4]);
        assert!(m.starts_with("argument `shortcut` of Residual must be a layer or layers in parentheses"), "{m}");
        let m = message("Residual(Relu, shortcut = Relu, shortcut = Tanh)", &[4]);
        assert!(m.starts_with("argument `shortcut` of Residual is given twice"), "{m}");
        let m = message("Residual(Linear(4), (Linear(4), Relu))", &[4]);
        assert!(
            m.contains("hint: a projection shortcut is written `shortcut = (Linear(4), Relu)` after the layers"),
            "{m}"
        );
        let m = message("Residual(Linear(4), shortcut = (Embedding(10, 4), Flatten))", &[4]);
        assert!(m.starts_with("Embedding(10, 4) cannot be inside Residual"), "{m}");
        let m = message("Repeat(2, Relu, shortcut = Relu)", &[4]);
        assert!(m.starts_with("Repeat has no argument `shortcut`"), "{m}");
        // A failed layer does not hide a mistake in the shortcut.
        let errors: Vec<String> = run("Residual(Linear(4 => 2), shortcut = Lineer(2))", &[8])
            .expect_err("two mistakes")
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[1].starts_with("unknown layer `Lineer`"), "{errors:?}");
    }

    fn tie_message(layers: &str) -> String {
        let src =
            format!("struct M {{ embed: layers![Embedding(84, 32), Dropout(0.1)], {layers}, tail: layers![Relu] }}");
        let item: syn::ItemStruct = syn::parse_str(&src).unwrap();
        let args = crate::parse::model::parse_args("input = [16]".parse().unwrap()).unwrap();
        let fields = crate::parse::model::parse_fields(&item).unwrap();
        match crate::analyse::plan(&item, &args, &fields, &Default::default()) {
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
    fn recurrent_layers_follow_pytorchs_shapes_and_parameter_counts() {
        let (outs, last) =
            run("Lstm(8, layers = 2, bidirectional = true, dropout = 0.1), Gru(4, return_sequences = false)", &[6, 5])
                .unwrap();
        assert_eq!(outs[0].output, vec![6, 16]);
        assert_eq!(last.shape, vec![4]);
        // nn.LSTM(5, 8, num_layers=2, bidirectional=True): 2·(4·8·(5+8) + 8·8) + 2·(4·8·(16+8) + 8·8).
        assert_eq!(outs[0].trainable, 2 * (4 * 8 * 13 + 64) + 2 * (4 * 8 * 24 + 64));
        // nn.GRU(16, 4): 3·4·(16+4) + 6·4.
        assert_eq!(outs[1].trainable, 3 * 4 * 20 + 24);
        assert!(matches!(
            &outs[0].kind,
            LayerKind::Lstm(r) if r.features == 5 && r.hidden == 8 && r.layers == 2 && r.bidirectional
                && r.dropout == 0.1 && r.return_sequences && r.seed == 0
        ));
        assert!(matches!(&outs[1].kind, LayerKind::Gru(r) if r.features == 16 && !r.return_sequences && r.seed == 1));
        assert_eq!(shapes("Reshape(28, 28), Lstm(128, return_sequences = false)", &[1, 28, 28])[1], vec![128]);
        assert!(message("Lstm(16)", &[1, 28, 28]).contains("insert `Reshape(28, 28)`"));
        assert!(message("Gru(16)", &[12]).contains("Embedding"));
        assert!(message("Lstm(28, 128)", &[28, 28]).contains("is `Lstm(128)` here"));
        assert!(message("LSTM(128)", &[28, 28]).contains("did you mean `Lstm`?"));
    }
}
