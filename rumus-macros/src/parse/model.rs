//! `#[model(...)]`'s own syntax: the attribute's arguments, the struct's fields (`layers![..]`
//! lists or nested models), and the shapes a nested model reports through its callback macro.

use std::collections::HashMap;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::Error;

use crate::parse::{parse_arg, parse_layer_list, parse_value, split_commas, LayerCall, Result, Value, ValueKind};
use crate::spec::{Shape, MAX_DIM};
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
