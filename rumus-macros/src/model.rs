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
    let mut seen: Vec<String> = Vec::new();
    for piece in split_commas(attr)? {
        let arg = parse_arg(piece)?;
        let Some(name) = &arg.name else {
            return Err(Error::new_spanned(
                &arg,
                "#[model] arguments are named: `input = [..]`, `output = [..]`, `forward = custom`",
            ));
        };
        let key = name.to_string();
        if seen.contains(&key) {
            return Err(Error::new_spanned(&arg, format!("#[model] argument `{key}` is given twice")));
        }
        seen.push(key.clone());
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
                let hint = match did_you_mean(&key, MODEL_ARGS) {
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
        syn::Type::Path(p) if p.qself.is_none() && p.path.segments.iter().all(|s| s.arguments.is_none()) => {
            Ok(FieldKind::Nested(p.path.clone()))
        }
        _ => Err(Error::new_spanned(
            ty,
            format!("field `{name}` must be `layers![...]` or another #[model] struct (without generics)"),
        )),
    }
}

/// Shapes and counts a nested model reports through its callback macro.
#[derive(Clone, Debug)]
pub struct NestedInfo {
    pub input: Shape,
    pub output: Shape,
    pub trainable: u128,
    pub buffers: u128,
    pub type_name: String,
}

/// Parses `field { input = [..], output = [..], trainable = N, buffers = M, name = Type } ...`.
pub fn parse_known(tokens: TokenStream) -> Result<HashMap<String, NestedInfo>> {
    let mut known = HashMap::new();
    let mut it = tokens.clone().into_iter().peekable();
    while let Some(tt) = it.next() {
        let (proc_macro2::TokenTree::Ident(field), Some(proc_macro2::TokenTree::Group(body))) = (tt, it.next()) else {
            return Err(Error::new_spanned(&tokens, "malformed nested-model information"));
        };
        let mut info = NestedInfo { input: vec![], output: vec![], trainable: 0, buffers: 0, type_name: String::new() };
        for piece in split_commas(body.stream())? {
            let arg = parse_arg(piece)?;
            let key = arg.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            match (key.as_str(), &arg.value.kind) {
                ("input", _) => info.input = shape_value(&arg.value, "input")?,
                ("output", _) => info.output = shape_value(&arg.value, "output")?,
                ("trainable", ValueKind::Int(n)) => info.trainable = (*n).max(0) as u128,
                ("buffers", ValueKind::Int(n)) => info.buffers = (*n).max(0) as u128,
                ("name", ValueKind::Word(w)) => info.type_name = w.to_string(),
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
}

/// Walks the fields in declaration order from the model input.
pub fn plan(
    item: &syn::ItemStruct,
    args: &ModelArgs,
    fields: &[Field],
    known: &HashMap<String, NestedInfo>,
) -> Result<Plan> {
    let Some((input, _)) = &args.input else {
        return Err(Error::new_spanned(
            &item.ident,
            format!(
                "#[model] needs the per-sample input shape (batch axis excluded)\nhint: write e.g. `#[model(input = [1, 28, 28])]` above `struct {}`",
                item.ident
            ),
        ));
    };
    let mut ctx = Ctx::default();
    let mut prod = Producer::input("the model input", input.clone());
    let mut plans = Vec::new();
    let (mut trainable, mut buffers) = (0u128, 0u128);
    for (i, f) in fields.iter().enumerate() {
        if let Some((shape, tokens)) = &f.input {
            if !args.custom {
                return Err(Error::new_spanned(
                    tokens,
                    format!("`#[input]` on field `{}` only applies with `#[model(forward = custom)]`; the generated forward runs the fields in order", f.name),
                ));
            }
            prod = Producer::input(format!("the input of `{}`", f.name), shape.clone());
        }
        let field_input = prod.shape.clone();
        let body = match &f.kind {
            FieldKind::Layers(layers) => {
                let (outs, last) =
                    infer_list(layers, prod, &mut ctx).map_err(|e| with_later_fields(e, &fields[i + 1..]))?;
                prod = last;
                FieldBody::Layers(outs)
            }
            FieldKind::Nested(path) => {
                let Some(info) = known.get(&f.name.to_string()) else {
                    return Err(Error::new_spanned(path, "nested model information is missing (bug in rumus-macros)"));
                };
                if info.input != prod.shape {
                    return Err(Error::new_spanned(
                        &f.ty_tokens,
                        format!(
                            "{} expects input {}, but {}\nhint: the nested model's #[model(input = ..)] must equal the shape at field `{}`",
                            info.type_name,
                            fmt_shape(&info.input),
                            prod.got(),
                            f.name
                        ),
                    ));
                }
                prod =
                    Producer { what: info.type_name.clone(), shape: info.output.clone(), from: None, is_input: false };
                FieldBody::Nested { path: path.clone(), info: info.clone(), seed: ctx.seed() }
            }
        };
        let (t, b) = match &body {
            FieldBody::Layers(outs) => outs
                .iter()
                .fold((0u128, 0u128), |(t, b), o| (t.saturating_add(o.trainable), b.saturating_add(o.buffers))),
            FieldBody::Nested { info, .. } => (info.trainable, info.buffers),
        };
        trainable = trainable.saturating_add(t);
        buffers = buffers.saturating_add(b);
        if prod.shape.is_empty() || prod.shape.len() > 4 {
            return Err(Error::new_spanned(
                &f.ty_tokens,
                format!(
                    "field `{}` produces {} of rank {}, but typed tensors have rank 1 to 4\nhint: Flatten or Reshape inside the field",
                    f.name,
                    fmt_shape(&prod.shape),
                    prod.shape.len()
                ),
            ));
        }
        plans.push(FieldPlan { input: field_input, output: prod.shape.clone(), body });
    }
    if trainable.saturating_add(buffers) > u64::MAX as u128 / 4 {
        return Err(Error::new_spanned(&item.ident, "the model's parameter count overflows"));
    }
    let output = match &args.output {
        Some((declared, tokens)) => {
            if !args.custom && *declared != prod.shape {
                return Err(Error::new_spanned(
                    tokens,
                    format!(
                        "#[model(output = {})] does not match the layers: {}\nhint: the output is inferred; remove `output` or fix the layers",
                        fmt_shape(declared),
                        prod.got()
                    ),
                ));
            }
            declared.clone()
        }
        None if args.custom => {
            return Err(Error::new_spanned(
                &item.ident,
                "`forward = custom` needs the output shape: `#[model(input = [..], output = [..], forward = custom)]`",
            ));
        }
        None => prod.shape.clone(),
    };
    Ok(Plan { input: input.clone(), output, fields: plans, trainable, buffers })
}

/// Adds to `e` the shape-independent errors (unknown layers and arguments) of `fields`, so one
/// build reports them all.
fn with_later_fields(mut e: Error, fields: &[Field]) -> Error {
    for f in fields {
        if let FieldKind::Layers(layers) = &f.kind {
            for call in layers {
                if let Err(more) = check_call(call) {
                    e.combine(more);
                }
            }
        }
    }
    e
}
