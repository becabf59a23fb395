//! Binding a layer call's arguments to its row of the table: positional in table order, named
//! by name, each converted to a typed [`Val`] and checked (kind, sign, range), every mistake a
//! spanned error on the argument itself.

use proc_macro2::TokenStream;
use syn::Error;

use super::{example, foreign, ArgSpec, Kind, LayerSpec, MAX_DIM};
use crate::parse::{Arg, LayerCall, Result, Value, ValueKind};
use crate::suggest::did_you_mean;

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

/// A layer's arguments after binding positional and named ones to the table. Each keeps the
/// tokens the user wrote, so that an error about it is spanned on exactly them.
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
    /// Whether argument `name` was written (not defaulted).
    pub fn given(&self, name: &str) -> bool {
        self.get(name).is_some()
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
    /// The layers of branch argument `name` (`Residual`'s `shortcut`), if given.
    pub fn branch(&self, name: &str) -> Option<&[LayerCall]> {
        match self.get(name) {
            Some(Val::Layers(l)) => Some(l),
            _ => None,
        }
    }
    /// Every layer call among the arguments: the variadic `layers`, then each branch.
    pub fn all_layers(&self) -> impl Iterator<Item = &LayerCall> {
        self.vals.iter().flat_map(|(_, v, _)| match v {
            Val::Layers(l) => l.as_slice(),
            _ => &[],
        })
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
                None => return Err(too_many_positional(spec, call, arg, &positional)),
            },
            Some(name) => named_arg(spec, name)?,
        };
        let val = convert(layer, aspec, &arg.value)?;
        bound.add(layer, aspec, val, arg)?;
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

/// A positional argument beyond those `spec` takes.
fn too_many_positional(spec: &LayerSpec, call: &LayerCall, arg: &Arg, positional: &[&ArgSpec]) -> Error {
    let layer = spec.name;
    if spec.args.is_empty() {
        return Error::new_spanned(arg, format!("{layer} takes no arguments\nhint: write `{layer}`"));
    }
    let names: Vec<&str> = positional.iter().map(|a| a.name).collect();
    let foreign = foreign::positional(layer, call).map(|h| format!("{h}; ")).unwrap_or_default();
    Error::new_spanned(
        arg,
        format!(
            "too many positional arguments for {layer}: it takes {} ({})\nhint: {foreign}give the others by name: {}",
            positional.len(),
            names.join(", "),
            arg_list(spec)
        ),
    )
}

/// The argument of `spec` called `name`, or an error with the likely one.
fn named_arg<'a>(spec: &'a LayerSpec, name: &syn::Ident) -> Result<&'a ArgSpec> {
    let (layer, name_str) = (spec.name, name.to_string());
    if let Some(a) = spec.args.iter().find(|a| a.name == name_str) {
        return Ok(a);
    }
    let hint = match foreign::argument(layer, &name_str) {
        Some(h) => format!("{h}; "),
        None => match did_you_mean(&name_str, spec.args.iter().map(|a| a.name)) {
            Some(s) => format!("did you mean `{s}`? "),
            None => String::new(),
        },
    };
    let takes = if spec.args.is_empty() { "no arguments".to_string() } else { arg_list(spec) };
    Err(Error::new_spanned(name, format!("{layer} has no argument `{name_str}`\nhint: {hint}{layer} takes {takes}")))
}

impl Bound {
    /// Adds `arg`'s value: variadic arguments accumulate; any other given twice is an error.
    fn add(&mut self, layer: &str, aspec: &ArgSpec, val: Val, arg: &Arg) -> Result<()> {
        match (self.vals.iter_mut().find(|(n, _, _)| *n == aspec.name), val) {
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
            (None, val) => self.vals.push((aspec.name, val, arg.tokens.clone())),
        }
        Ok(())
    }
}

fn arg_list(spec: &LayerSpec) -> String {
    let parts: Vec<String> = spec
        .args
        .iter()
        .map(|a| if a.default.is_empty() { a.name.to_string() } else { format!("{} = {}", a.name, a.default) })
        .collect();
    format!("({})", parts.join(", "))
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
        Kind::ConvPad => conv_padding(layer, a, v)?,
        Kind::Count => Val::Usize(size_of(layer, a, v, 0)?),
        Kind::ConvPad1d => conv_padding1d(layer, a, v)?,
        Kind::Mode => mode_of(layer, a, v)?,
        Kind::Prob => Val::Float(prob_of(layer, a, v)?),
        Kind::PosFloat => Val::Float(positive_of(layer, a, v)?),
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
        Kind::Dims => Val::Dims(dims_of(layer, a, v)?),
        Kind::Layers => match layer_of(v) {
            Some(c) => Val::Layers(vec![c]),
            None if layer == "Residual" && matches!(v.kind, ValueKind::Tuple(_)) => {
                return Err(Error::new_spanned(
                    v,
                    format!("Residual's layers are listed without parentheses: `{v}` is not a layer\nhint: a projection shortcut is written `shortcut = {v}` after the layers"),
                ))
            }
            None => {
                return Err(Error::new_spanned(v, format!("{layer} takes layers, got `{v}`\nhint: {}", example(layer))))
            }
        },
        Kind::Branch => Val::Layers(branch_of(layer, a, v)?),
        Kind::LayerRef => match &v.kind {
            ValueKind::Ref(field, index) if *index >= 0 && *index <= MAX_DIM as i128 => {
                Val::Ref(field.to_string(), *index as usize)
            }
            _ => return Err(type_error(layer, a, v)),
        },
    })
}

/// `Name(..)` or a bare `Name` as a layer call.
fn layer_of(v: &Value) -> Option<LayerCall> {
    match &v.kind {
        ValueKind::Call(c) => Some(c.clone()),
        ValueKind::Word(w) => Some(LayerCall { name: w.clone(), args: Vec::new(), tokens: v.tokens.clone() }),
        _ => None,
    }
}

/// A side branch: one layer, or one or more layers in parentheses.
fn branch_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<Vec<LayerCall>> {
    if let Some(c) = layer_of(v) {
        return Ok(vec![c]);
    }
    let items = match &v.kind {
        ValueKind::Tuple(items) => items,
        _ => return Err(type_error(layer, a, v)),
    };
    if items.is_empty() {
        return Err(Error::new_spanned(
            v,
            format!("argument `{}` of {layer} has no layers\nhint: leave `{}` out for the identity", a.name, a.name),
        ));
    }
    items.iter().map(|item| layer_of(item).ok_or_else(|| type_error(layer, a, item))).collect()
}

/// A probability in [0, 1).
fn prob_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<f64> {
    let p = float_of(layer, a, v)?;
    if !(0.0..1.0).contains(&p) {
        return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be in [0, 1), got {p}", a.name)));
    }
    Ok(p)
}

/// A positive float.
fn positive_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<f64> {
    let f = float_of(layer, a, v)?;
    if f <= 0.0 {
        return Err(Error::new_spanned(v, format!("argument `{}` of {layer} must be positive, got {f}", a.name)));
    }
    Ok(f)
}

/// `same`, `valid`, a size or a pair.
fn conv_padding(layer: &str, a: &ArgSpec, v: &Value) -> Result<Val> {
    Ok(match &v.kind {
        ValueKind::Word(w) if w == "same" => Val::Same,
        ValueKind::Word(w) if w == "valid" => Val::Pair(0, 0),
        ValueKind::Word(_) => {
            return Err(Error::new_spanned(
                v,
                format!(
                "argument `padding` of {layer} must be {}, got `{v}`\nhint: the words it knows are `same` and `valid`",
                a.kind.describe()
            ),
            ))
        }
        _ => {
            let (h, w) = pair_of(layer, a, v, 0)?;
            Val::Pair(h, w)
        }
    })
}

/// `same`, `valid` or a size (one axis).
fn conv_padding1d(layer: &str, a: &ArgSpec, v: &Value) -> Result<Val> {
    Ok(match &v.kind {
        ValueKind::Word(w) if w == "same" => Val::Same,
        ValueKind::Word(w) if w == "valid" => Val::Usize(0),
        ValueKind::Word(_) => {
            return Err(Error::new_spanned(
                v,
                format!(
                "argument `padding` of {layer} must be {}, got `{v}`\nhint: the words it knows are `same` and `valid`",
                a.kind.describe()
            ),
            ))
        }
        _ => Val::Usize(size_of(layer, a, v, 0)?),
    })
}

/// An upsampling mode, `nearest` or `bilinear`.
fn mode_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<Val> {
    match &v.kind {
        ValueKind::Word(w) if w == "nearest" || w == "bilinear" => Ok(Val::Word(w.to_string())),
        _ => Err(Error::new_spanned(
            v,
            format!(
                "argument `{}` of {layer} must be {}, got `{v}`\nhint: `mode = bilinear` (align_corners = false, as PyTorch's default)",
                a.name,
                a.kind.describe()
            ),
        )),
    }
}

/// One or more sizes (a -1 allowed, to infer), bare or as a tuple or list.
fn dims_of(layer: &str, a: &ArgSpec, v: &Value) -> Result<Vec<i64>> {
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
    Ok(dims)
}
