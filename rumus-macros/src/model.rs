//! `#[model(...)]`: parses the attribute and the struct, and walks the fields in order to a
//! [`Plan`] (every field's input and output shape, its layers, its parameter counts).

use std::collections::HashMap;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::Error;

use crate::infer::{check_call, infer_list, Ctx, LayerOut, Producer};
use crate::parse::{parse_arg, parse_layer_list, parse_value, split_commas, LayerCall, Result, Value, ValueKind};
use crate::spec::{fmt_shape, Shape, MAX_DIM};
use crate::suggest::did_you_mean;

/// The `#[model(...)]` arguments.
pub struct ModelArgs {
    pub input: Option<(Shape, TokenStream)>,
    pub output: Option<(Shape, TokenStream)>,
    /// `forward = custom`: the user writes `forward`; everything else is generated.
    pub custom: bool,
}

const MODEL_ARGS: [&str; 3] = ["input", "output", "forward"];

pub fn parse_args(attr: TokenStream) -> Result<ModelArgs> {
    let mut args = ModelArgs { input: None, output: None, custom: false };
    let mut seen: Vec<(String, String)> = Vec::new();
    for piece in split_commas(attr)? {
        let arg = parse_arg(piece)?;
        let Some(name) = &arg.name else {
            return Err(Error::new_spanned(
                &arg,
                "#[model] arguments are named: `input = [..]`, `output = [..]`, `forward = custom`",
            ));
        };
        let key = name.to_string();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(Error::new_spanned(
                &arg,
                format!(
                    "#[model] argument `{key}` is given twice: first `{first}`, then `{arg}`\nhint: keep one of them"
                ),
            ));
        }
        seen.push((key.clone(), arg.to_string()));
        match key.as_str() {
            "input" => args.input = Some((shape_value(&arg.value, "input")?, arg.value.tokens.clone())),
            "output" => args.output = Some((shape_value(&arg.value, "output")?, arg.value.tokens.clone())),
            "forward" => match &arg.value.kind {
                ValueKind::Word(w) if w == "custom" => args.custom = true,
                ValueKind::Word(w) if w == "generated" => args.custom = false,
                _ => {
                    return Err(Error::new_spanned(
                        &arg.value,
                        "`forward` takes `custom` (you write `forward`, typed) or `generated` (the default)",
                    ))
                }
            },
            _ => {
                // Keras's `input_shape` / `output_shape`.
                let foreign = match key.as_str() {
                    "input_shape" | "in_shape" | "shape" => Some("input"),
                    "output_shape" | "out_shape" => Some("output"),
                    _ => None,
                };
                let hint = match foreign.or_else(|| did_you_mean(&key, MODEL_ARGS)) {
                    Some(s) => format!("did you mean `{s}`? "),
                    None => String::new(),
                };
                return Err(Error::new_spanned(
                    name,
                    format!("unknown #[model] argument `{key}`\nhint: {hint}#[model] takes `input = [..]`, `output = [..]`, `forward = custom`"),
                ));
            }
        }
    }
    Ok(args)
}

/// A per-sample shape such as `[1, 28, 28]`: one to four positive sizes (the ranks typed tensors have).
pub fn shape_value(v: &Value, what: &str) -> Result<Shape> {
    let items = match &v.kind {
        ValueKind::List(items) | ValueKind::Tuple(items) => items,
        ValueKind::Int(_) => std::slice::from_ref(v),
        _ => {
            return Err(Error::new_spanned(
                v,
                format!("`{what}` must be a per-sample shape such as `[1, 28, 28]`, got `{v}`"),
            ));
        }
    };
    if items.is_empty() || items.len() > 4 {
        return Err(Error::new_spanned(
            v,
            format!("`{what}` must have 1 to 4 dimensions (typed tensors are Shape1..Shape4), got {}", items.len()),
        ));
    }
    let mut shape = Vec::new();
    for item in items {
        match item.kind {
            ValueKind::Int(i) if i > 0 && i <= MAX_DIM as i128 => shape.push(i as usize),
            ValueKind::Int(i) if i <= 0 => {
                return Err(Error::new_spanned(item, format!("dimensions of `{what}` must be positive, got {i}")))
            }
            ValueKind::Int(i) => {
                return Err(Error::new_spanned(
                    item,
                    format!("dimensions of `{what}` must be at most 2^31 ({MAX_DIM}), got {i}"),
                ))
            }
            _ => {
                return Err(Error::new_spanned(
                    item,
                    format!("dimensions of `{what}` must be positive integers, got `{item}`"),
                ))
            }
        }
    }
    Ok(shape)
}

pub enum FieldKind {
    Layers(Vec<LayerCall>),
    Nested(syn::Path),
}

pub struct Field {
    pub name: syn::Ident,
    pub vis: syn::Visibility,
    /// Attributes other than ours (docs, cfgs) — passed through.
    pub attrs: Vec<syn::Attribute>,
    pub kind: FieldKind,
    /// `#[input = [..]]`: where a custom forward feeds this field from.
    pub input: Option<(Shape, TokenStream)>,
    pub ty_tokens: TokenStream,
}

/// Classifies the struct's fields. Errors name the field.
pub fn parse_fields(item: &syn::ItemStruct) -> Result<Vec<Field>> {
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        return Err(Error::new_spanned(
            &item.generics,
            "#[model] structs cannot be generic: the macro fixes every shape",
        ));
    }
    let syn::Fields::Named(named) = &item.fields else {
        return Err(Error::new_spanned(
            &item.ident,
            "#[model] needs a struct with named fields, e.g. `struct Net { body: layers![Linear(10)] }`",
        ));
    };
    if named.named.is_empty() {
        return Err(Error::new_spanned(
            &item.ident,
            "#[model] struct has no fields; add e.g. `body: layers![Linear(10)]`",
        ));
    }
    let mut fields = Vec::new();
    for f in &named.named {
        let Some(name) = f.ident.clone() else { continue };
        let mut attrs = Vec::new();
        let mut input = None;
        for a in &f.attrs {
            if a.path().is_ident("input") {
                let syn::Meta::NameValue(nv) = &a.meta else {
                    return Err(Error::new_spanned(a, "write the field's input shape as `#[input = [..]]`"));
                };
                let value = parse_value(nv.value.to_token_stream())?;
                input = Some((shape_value(&value, "input")?, a.to_token_stream()));
            } else {
                attrs.push(a.clone());
            }
        }
        let kind = classify(&f.ty, &name)?;
        fields.push(Field { name, vis: f.vis.clone(), attrs, kind, input, ty_tokens: f.ty.to_token_stream() });
    }
    Ok(fields)
}

fn classify(ty: &syn::Type, name: &syn::Ident) -> Result<FieldKind> {
    match ty {
        syn::Type::Group(g) => classify(&g.elem, name),
        syn::Type::Paren(p) => classify(&p.elem, name),
        syn::Type::Macro(m) if m.mac.path.segments.last().is_some_and(|s| s.ident == "layers") => {
            let layers = parse_layer_list(m.mac.tokens.clone())?;
            if layers.is_empty() {
                return Err(Error::new_spanned(
                    m,
                    format!("`{name}: layers![]` is empty; a layer list needs at least one layer, e.g. `layers![Linear(10)]`"),
                ));
            }
            Ok(FieldKind::Layers(layers))
        }
        syn::Type::Macro(m) => {
            let written = m.mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            let hint = match did_you_mean(&written, ["layers"]) {
                Some(_) => "did you mean `layers![...]`? ".to_string(),
                None => String::new(),
            };
            Err(Error::new_spanned(
                &m.mac.path,
                format!("field `{name}` of a #[model] struct cannot be `{written}![...]`\nhint: {hint}a field is `layers![...]` or another #[model] struct"),
            ))
        }
        syn::Type::Path(p) if p.qself.is_none() && p.path.segments.iter().all(|s| s.arguments.is_none()) => {
            let last = p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            if p.path.segments.len() == 1 && NOT_MODELS.contains(&last.as_str()) {
                return Err(not_a_model_field(ty, name));
            }
            Ok(FieldKind::Nested(p.path.clone()))
        }
        _ => Err(not_a_model_field(ty, name)),
    }
}

/// Types that are certainly not #[model] structs; other paths are taken for nested models and
/// checked by resolving their callback macro.
const NOT_MODELS: &[&str] = &[
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "bool",
    "char",
    "str",
    "String",
    "Tensor",
    "RawTensor",
    "Device",
    "Sequential",
];

/// Fields are the model's layers: `new` builds each one, so a field of any other type could not
/// be initialised. Other state belongs in a struct that holds the model.
fn not_a_model_field(ty: &syn::Type, name: &syn::Ident) -> Error {
    let ty_str = ty.to_token_stream().to_string().replace(" < ", "<").replace(" >", ">").replace(" , ", ", ");
    Error::new_spanned(
        ty,
        format!(
            "field `{name}: {ty_str}` of a #[model] struct must be `layers![...]` or another #[model] struct\nhint: `new` builds every field from the model's shapes, so other state (settings such as a temperature, counters, buffers) goes in a struct that holds the model, e.g. `struct Wrapper {{ net: Net, {name}: {ty_str} }}`"
        ),
    )
}

/// Shapes and counts a nested model reports through its callback macro.
#[derive(Clone, Debug, Default)]
pub struct NestedInfo {
    pub input: Shape,
    pub output: Shape,
    pub trainable: u128,
    pub buffers: u128,
    pub type_name: String,
    /// Its input is read as token indices (it starts with an Embedding).
    pub indices: bool,
    /// The nested model has an error of its own (already reported there): its shapes are
    /// unknown, so the enclosing model stops checking at this field and reports nothing more.
    pub poisoned: bool,
}

/// Parses `field { input = [..], output = [..], trainable = N, buffers = M, name = Type } ...`.
pub fn parse_known(tokens: TokenStream) -> Result<HashMap<String, NestedInfo>> {
    let mut known = HashMap::new();
    let mut it = tokens.clone().into_iter().peekable();
    while let Some(tt) = it.next() {
        let (proc_macro2::TokenTree::Ident(field), Some(proc_macro2::TokenTree::Group(body))) = (tt, it.next()) else {
            return Err(Error::new_spanned(&tokens, "malformed nested-model information"));
        };
        let mut info = NestedInfo::default();
        for piece in split_commas(body.stream())? {
            let arg = parse_arg(piece)?;
            let key = arg.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            match (key.as_str(), &arg.value.kind) {
                ("input", _) => info.input = shape_value(&arg.value, "input")?,
                ("output", _) => info.output = shape_value(&arg.value, "output")?,
                ("trainable", ValueKind::Int(n)) => info.trainable = (*n).max(0) as u128,
                ("buffers", ValueKind::Int(n)) => info.buffers = (*n).max(0) as u128,
                ("name", ValueKind::Word(w)) => info.type_name = w.to_string(),
                ("indices", ValueKind::Bool(b)) => info.indices = *b,
                ("poisoned", ValueKind::Bool(b)) => info.poisoned = *b,
                _ => return Err(Error::new_spanned(&arg, "malformed nested-model information")),
            }
        }
        known.insert(field.to_string(), info);
    }
    Ok(known)
}

pub enum FieldBody {
    Layers(Vec<LayerOut>),
    Nested { path: syn::Path, info: NestedInfo, seed: TokenStream },
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
    /// The `(field, index)` of every Embedding whose weight a `Linear(.., tie = ..)` shares.
    pub tied: Vec<(String, usize)>,
    /// `CausalSelfAttention` and `TransformerBlock` layers of this model (each `Repeat` copy
    /// counted, nested models not): the `depth` their constructors take.
    pub attention_layers: usize,
}

/// Why [`plan`] stopped, and what it knew by then (the dummies of a failed model use it).
#[derive(Debug)]
pub struct Stop {
    /// `None` when a nested model has an error of its own, reported where that model is.
    pub error: Option<Error>,
    /// `(input, output)` of the fields planned before the stop.
    pub done: Vec<(Shape, Shape)>,
    /// The input of the field it stopped at.
    pub next_input: Option<Shape>,
}

/// Walks the fields in declaration order from the model input.
pub fn plan(
    item: &syn::ItemStruct,
    args: &ModelArgs,
    fields: &[Field],
    known: &HashMap<String, NestedInfo>,
) -> std::result::Result<Plan, Stop> {
    let Some((input, _)) = &args.input else {
        let e = Error::new_spanned(
            &item.ident,
            format!(
                "#[model] needs the per-sample input shape (batch axis excluded)\nhint: write e.g. `#[model(input = [1, 28, 28])]` above `struct {}`",
                item.ident
            ),
        );
        return Err(Stop { error: Some(e), done: Vec::new(), next_input: None });
    };
    let mut ctx =
        Ctx::new(fields.iter().map(|f| (f.name.to_string(), matches!(f.kind, FieldKind::Layers(_)))).collect());
    let mut prod = Producer::input("the model input", input.clone());
    let mut plans: Vec<FieldPlan> = Vec::new();
    let (mut trainable, mut buffers, mut indices) = (0u128, 0u128, false);
    for (i, f) in fields.iter().enumerate() {
        let stop = |error: Option<Error>, plans: &[FieldPlan], at: &Shape| Stop {
            error,
            done: plans.iter().map(|p| (p.input.clone(), p.output.clone())).collect(),
            next_input: Some(at.clone()),
        };
        if let Some((shape, tokens)) = &f.input {
            if !args.custom {
                let e = Error::new_spanned(
                    tokens,
                    format!("`#[input]` on field `{}` only applies with `#[model(forward = custom)]`; the generated forward runs the fields in order", f.name),
                );
                return Err(stop(Some(e), &plans, &prod.shape));
            }
            prod = Producer::input(format!("the input of `{}`", f.name), shape.clone());
        }
        let field_input = prod.shape.clone();
        ctx.field = f.name.to_string();
        let from_model_input = i == 0 && f.input.is_none();
        let body = match plan_field(f, prod.clone(), known, &mut ctx) {
            Ok((body, next)) => {
                prod = next;
                body
            }
            Err(error) => {
                let error = with_later_fields(error, &fields[i + 1..]);
                return Err(stop(error, &plans, &field_input));
            }
        };
        let (t, b) = match &body {
            FieldBody::Layers(outs) => outs
                .iter()
                .fold((0u128, 0u128), |(t, b), o| (t.saturating_add(o.trainable), b.saturating_add(o.buffers))),
            FieldBody::Nested { info, .. } => (info.trainable, info.buffers),
        };
        indices |= from_model_input
            && match (&body, &f.kind) {
                (FieldBody::Nested { info, .. }, _) => info.indices,
                (_, FieldKind::Layers(layers)) => layers.first().is_some_and(|l| l.name == "Embedding"),
                _ => false,
            };
        trainable = trainable.saturating_add(t);
        buffers = buffers.saturating_add(b);
        if prod.shape.is_empty() || prod.shape.len() > 4 {
            let e = Error::new_spanned(
                &f.ty_tokens,
                format!(
                    "field `{}` produces {} of rank {}, but typed tensors have rank 1 to 4\nhint: Flatten or Reshape inside the field",
                    f.name,
                    fmt_shape(&prod.shape),
                    prod.shape.len()
                ),
            );
            return Err(stop(Some(e), &plans, &field_input));
        }
        plans.push(FieldPlan { input: field_input, output: prod.shape.clone(), body });
    }
    let done: Vec<(Shape, Shape)> = plans.iter().map(|p| (p.input.clone(), p.output.clone())).collect();
    let fail = |e: Error| Stop { error: Some(e), done: done.clone(), next_input: None };
    if trainable.saturating_add(buffers) > u64::MAX as u128 / 4 {
        return Err(fail(Error::new_spanned(&item.ident, "the model's parameter count overflows")));
    }
    let output = match &args.output {
        Some((declared, tokens)) => {
            if !args.custom && *declared != prod.shape {
                return Err(fail(Error::new_spanned(
                    tokens,
                    format!(
                        "#[model(output = {})] does not match the layers: {}\nhint: the output is inferred; remove `output` or fix the layers",
                        fmt_shape(declared),
                        prod.got()
                    ),
                )));
            }
            declared.clone()
        }
        None if args.custom => {
            return Err(fail(Error::new_spanned(
                &item.ident,
                "`forward = custom` needs the output shape: `#[model(input = [..], output = [..], forward = custom)]`",
            )));
        }
        None => prod.shape.clone(),
    };
    Ok(Plan {
        input: input.clone(),
        output,
        fields: plans,
        trainable,
        buffers,
        indices,
        tied: ctx.tied,
        attention_layers: ctx.attention_layers,
    })
}

/// Plans one field from `prod`; `Err(None)` when it is a nested model with its own error.
fn plan_field(
    f: &Field,
    prod: Producer,
    known: &HashMap<String, NestedInfo>,
    ctx: &mut Ctx,
) -> std::result::Result<(FieldBody, Producer), Option<Error>> {
    match &f.kind {
        FieldKind::Layers(layers) => {
            let (outs, last) = infer_list(layers, prod, ctx)?;
            Ok((FieldBody::Layers(outs), last))
        }
        FieldKind::Nested(path) => {
            let Some(info) = known.get(&f.name.to_string()) else {
                return Err(Some(Error::new_spanned(
                    path,
                    "nested model information is missing (bug in rumus-macros)",
                )));
            };
            if info.poisoned {
                return Err(None);
            }
            if info.input != prod.shape {
                return Err(Some(Error::new_spanned(
                    &f.ty_tokens,
                    format!(
                        "{} expects input {}, but {}\nhint: the nested model's #[model(input = ..)] must equal the shape at field `{}`",
                        info.type_name,
                        fmt_shape(&info.input),
                        prod.got(),
                        f.name
                    ),
                )));
            }
            if info.indices && !prod.indices {
                return Err(Some(Error::new_spanned(
                    &f.ty_tokens,
                    format!(
                        "{} starts with an Embedding, which reads token indices, but {}, which are not indices\nhint: put `{}` first, on the model input, or start it with a layer that takes features",
                        info.type_name,
                        prod.got(),
                        f.name
                    ),
                )));
            }
            let next = Producer::output(info.type_name.clone(), info.output.clone(), None);
            Ok((FieldBody::Nested { path: path.clone(), info: info.clone(), seed: ctx.seed() }, next))
        }
    }
}

/// Adds to `e` the shape-independent errors (unknown layers and arguments) of `fields`, so one
/// build reports them all.
fn with_later_fields(mut e: Option<Error>, fields: &[Field]) -> Option<Error> {
    for f in fields {
        if let FieldKind::Layers(layers) = &f.kind {
            for call in layers {
                if let Err(more) = check_call(call) {
                    match &mut e {
                        Some(all) => all.combine(more),
                        None => e = Some(more),
                    }
                }
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(src: &str) -> Result<Shape> {
        shape_value(&parse_value(src.parse().unwrap())?, "input")
    }

    /// Sizes from 1 to 2^31 are accepted; above, the message names the limit, not positivity.
    #[test]
    fn input_sizes_are_limited_to_2_pow_31_with_a_message_that_says_so() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % (1u64 << 33)) as i128 - (1 << 31);
            let got = shape_of(&format!("[{n}]"));
            match n {
                1..=0x8000_0000 => assert_eq!(got.unwrap(), vec![n as usize]),
                ..=0 => assert!(got.unwrap_err().to_string().contains("must be positive"), "{n}"),
                _ => {
                    let m = got.unwrap_err().to_string();
                    assert!(m.contains("at most 2^31") && m.contains(&n.to_string()), "{n}: {m}");
                }
            }
        }
        assert!(shape_of("[2147483648]").is_ok());
        assert!(shape_of("[4294967296]")
            .unwrap_err()
            .to_string()
            .contains("at most 2^31 (2147483648), got 4294967296"));
    }

    fn plan_of(attr: &str, item: &str, known: &str) -> std::result::Result<Plan, Stop> {
        let item: syn::ItemStruct = syn::parse_str(item).unwrap();
        let args = parse_args(attr.parse().unwrap()).unwrap();
        let fields = parse_fields(&item).unwrap();
        plan(&item, &args, &fields, &parse_known(known.parse().unwrap()).unwrap())
    }

    fn error_of(attr: &str, item: &str, known: &str) -> String {
        plan_of(attr, item, known).err().and_then(|s| s.error).expect("an error").to_string()
    }

    #[test]
    fn a_model_reads_indices_when_its_input_goes_into_an_embedding() {
        let p = plan_of("input = [16]", "struct T { e: layers![Embedding(10, 4)] }", "").unwrap();
        assert!(p.indices);
        let p = plan_of("input = [16]", "struct T { e: layers![Linear(4)] }", "").unwrap();
        assert!(!p.indices);
        // Through a nested model that itself reads indices.
        let known = "t { input = [16], output = [16, 4], trainable = 40, buffers = 0, name = Tok, indices = true }";
        let p = plan_of("input = [16]", "struct O { t: Tok, h: layers![Flatten, Linear(2)] }", known).unwrap();
        assert!(p.indices);
    }

    #[test]
    fn an_index_reading_nested_model_after_a_layer_is_an_error() {
        let known = "t { input = [16], output = [16, 4], trainable = 40, buffers = 0, name = Tok, indices = true }";
        let m = error_of("input = [4]", "struct O { a: layers![Linear(16)], t: Tok }", known);
        assert!(m.starts_with("Tok starts with an Embedding, which reads token indices, but Linear(4 => 16)"), "{m}");
        // With a custom forward, a field's `#[input]` may take indices.
        let ok = plan_of(
            "input = [4], output = [16, 4], forward = custom",
            "struct O { a: layers![Linear(16)], #[input = [16]] t: Tok }",
            known,
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn a_poisoned_nested_model_stops_the_plan_without_an_error_but_keeps_earlier_fields() {
        let stop = plan_of(
            "input = [8]",
            "struct O { a: layers![Linear(6)], i: Inner, b: layers![Linear(2)] }",
            "i { poisoned = true, name = Inner }",
        )
        .err()
        .unwrap();
        assert!(stop.error.is_none());
        assert_eq!(stop.done, vec![(vec![8], vec![6])]);
        assert_eq!(stop.next_input, Some(vec![6]));
        // A shape-independent mistake after it is still reported.
        let m = error_of(
            "input = [8]",
            "struct O { i: Inner, b: layers![Lineer(2)] }",
            "i { poisoned = true, name = Inner }",
        );
        assert!(m.starts_with("unknown layer `Lineer`"), "{m}");
    }

    #[test]
    fn field_types_that_are_not_models_are_named_errors() {
        for (ty, want) in [
            ("f32", "field `t: f32` of a #[model] struct must be"),
            ("Vec<f32>", "field `t: Vec<f32>`"),
            ("&'static str", "must be `layers![...]` or another #[model] struct"),
            ("layer![Linear(2)]", "did you mean `layers![...]`?"),
        ] {
            let item: syn::ItemStruct = syn::parse_str(&format!("struct N {{ t: {ty} }}")).unwrap();
            let m = parse_fields(&item).err().expect("an error").to_string();
            assert!(m.contains(want), "{ty}: {m}");
        }
        let item: syn::ItemStruct = syn::parse_str("struct N { t: crate::a::Backbone }").unwrap();
        assert!(matches!(parse_fields(&item).unwrap()[0].kind, FieldKind::Nested(_)));
    }
}
