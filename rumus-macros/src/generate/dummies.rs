//! What a failed `#[model]` expands to: its one error, and beside it the struct with every item
//! the macro would have generated (inherent methods, consts, trait impls, the callback macro) as
//! dummies, as clap_derive does. Without them each use of the model (`Net::new`, `net.forward`)
//! would add an error of its own, and an enclosing model would add "not a rumus model".
//!
//! Shapes known before the error keep their types; unknown ones are generic parameters of the
//! method, so the caller's types are accepted as they are. Bodies are `unimplemented!()`: the
//! crate does not compile anyway.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};

use super::callback::callback_macro;
use super::tokens::{dims, shape_type};
use crate::analyse::{self, Stop};
use crate::parse::model;
use crate::spec::{self, Shape};

/// The error of `stop` (if it is this model's), the struct and the dummy surface.
pub fn surface(item: &syn::ItemStruct, attr: &TokenStream, stop: Stop) -> TokenStream {
    let mut out = stop.error.as_ref().map(|e| e.to_compile_error()).unwrap_or_default();
    out.extend(fallback(item));
    // A generic struct is itself the error (#[model] fixes every shape); impls of `Net` without
    // its parameters would be errors of their own.
    if item.generics.params.is_empty() {
        out.extend(dummy_items(item, attr, &stop));
    }
    // An enclosing model learns that this one is broken and reports nothing more about it.
    let name = &item.ident;
    out.extend(callback_macro(item, quote!(poisoned = true, name = #name)));
    out
}

/// The struct with the runtime field types (layer lists are `Sequential`) and without our
/// field attributes.
fn fallback(item: &syn::ItemStruct) -> TokenStream {
    let mut item = item.clone();
    for f in item.fields.iter_mut() {
        f.attrs.retain(|a| !a.path().is_ident("input"));
        // `layers![..]`, and any other macro (`layer![..]`), which would be a second error.
        if matches!(&f.ty, syn::Type::Macro(_)) {
            f.ty = syn::parse_quote!(::rumus::nn::Sequential);
        }
    }
    item.to_token_stream()
}

/// What is known of the model's shapes: its input and output, and each field's.
struct Known {
    input: Option<Shape>,
    output: Option<Shape>,
    custom: bool,
    fields: Vec<(syn::Ident, Option<Shape>, Option<Shape>)>,
}

/// The `#[model(...)]` arguments that parse, skipping those that do not: a typo in one argument
/// should not lose the shapes the others give.
fn lenient_args(attr: &TokenStream) -> model::ModelArgs {
    let mut args = model::ModelArgs { input: None, output: None, custom: false };
    for piece in crate::parse::split_commas(attr.clone()).unwrap_or_default() {
        let Ok(arg) = crate::parse::parse_arg(piece) else { continue };
        let key = arg.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
        match key.as_str() {
            "input" => args.input = model::shape_value(&arg.value, "input").ok().map(|s| (s, arg.value.tokens.clone())),
            "output" => {
                args.output = model::shape_value(&arg.value, "output").ok().map(|s| (s, arg.value.tokens.clone()))
            }
            "forward" => args.custom = arg.value.to_string() == "custom",
            _ => {}
        }
    }
    args
}

/// When the model stopped before planning any field (an argument or a field type was wrong),
/// plans what can be planned anyway, for the types of the dummies only (its errors are not
/// reported: the first error is the one that counts).
fn replan(item: &syn::ItemStruct, args: &model::ModelArgs, stop: &Stop) -> Option<Stop> {
    if !stop.done.is_empty() || stop.next_input.is_some() {
        return None;
    }
    let fields = model::parse_fields(item).ok()?;
    match analyse::plan(item, args, &fields, &std::collections::HashMap::new()) {
        Ok(plan) => Some(Stop {
            error: None,
            done: plan.fields.iter().map(|f| (f.input.clone(), f.output.clone())).collect(),
            next_input: None,
        }),
        Err(partial) => Some(partial),
    }
}

fn known(item: &syn::ItemStruct, attr: &TokenStream, stop: &Stop) -> Known {
    let args = lenient_args(attr);
    let replanned = replan(item, &args, stop);
    let stop = replanned.as_ref().unwrap_or(stop);
    let input = args.input.as_ref().map(|(s, _)| s.clone());
    let custom = args.custom;
    let args = Some(args);
    let names: Vec<syn::Ident> = item.fields.iter().filter_map(|f| f.ident.clone()).collect();
    let fields: Vec<(syn::Ident, Option<Shape>, Option<Shape>)> = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| match stop.done.get(i) {
            Some((a, b)) => (name, Some(a.clone()), Some(b.clone())),
            None if i == stop.done.len() => (name, stop.next_input.clone(), None),
            None => (name, None, None),
        })
        .collect();
    let inferred = match fields.last() {
        Some((_, _, out)) if stop.done.len() == fields.len() && !custom => out.clone(),
        _ => None,
    };
    let output = args
        .as_ref()
        .and_then(|a| a.output.as_ref().map(|(s, _)| s.clone()))
        .or(inferred)
        .or_else(|| guess_output(item, input.as_deref()));
    Known { input, output, custom, fields }
}

/// The output a failed model was meant to have, when its last layers say so: a classifier head
/// ending in `Linear(10)` (then only shape-keeping layers) on features that were flattened, or
/// a fixed `Reshape`. Typing `forward` with it keeps the caller's `Tensor<Shape1<10>>` and
/// `let y = net.forward(&x)?` both free of errors; with no such ending it stays generic.
fn guess_output(item: &syn::ItemStruct, input: Option<&[usize]>) -> Option<Shape> {
    let fields = model::parse_fields(item).ok()?;
    let model::FieldKind::Layers(last) = &fields.last()?.kind else { return None };
    let all: Vec<&crate::parse::LayerCall> = fields
        .iter()
        .filter_map(|f| match &f.kind {
            model::FieldKind::Layers(l) => Some(l.iter()),
            model::FieldKind::Nested(_) => None,
        })
        .flatten()
        .collect();
    let decisive = last.iter().rev().find(|l| !spec::find(&l.name.to_string()).is_some_and(|s| s.keeps_shape))?;
    let spec = spec::find(&decisive.name.to_string())?;
    let bound = spec::bind(spec, decisive).ok()?;
    match spec.name {
        "Linear" => {
            // An unknown input is most often a vector of features.
            let flat = input.is_none_or(|s| s.len() == 1) || all.iter().any(|l| l.name == "Flatten");
            let (_, out) = bound.features()?;
            flat.then(|| vec![out])
        }
        "Reshape" => {
            let dims = bound.dims("shape")?;
            dims.iter().all(|d| *d > 0).then(|| dims.iter().map(|d| *d as usize).collect())
        }
        _ => None,
    }
}

/// `Tensor<Shape1<10>>`, or `Tensor<P>` with `P` added to the method's generic parameters.
fn tensor(shape: &Option<Shape>, param: &str, generics: &mut Vec<syn::Ident>) -> TokenStream {
    match shape {
        Some(s) if (1..=4).contains(&s.len()) => {
            let t = shape_type(s);
            quote!(::rumus::Tensor<#t>)
        }
        _ => {
            let p = format_ident!("{}", param);
            generics.push(p.clone());
            quote!(::rumus::Tensor<#p>)
        }
    }
}

/// `fn name<..>(&self, _x: &Tensor<In>) -> Result<Tensor<Out>>` with an `unimplemented!` body.
fn typed_method(
    name: &syn::Ident,
    receiver: TokenStream,
    input: &Option<Shape>,
    output: &Option<Shape>,
) -> TokenStream {
    let mut generics = Vec::new();
    let (i, o) = (tensor(input, "In", &mut generics), tensor(output, "Out", &mut generics));
    quote! {
        pub fn #name<#(#generics: ::rumus::Shape),*>(#receiver, _x: &#i) -> ::rumus::Result<#o> {
            ::core::unimplemented!()
        }
    }
}

/// A concrete shape type for the trait impls; `Shape1<0>` (never a real shape) when unknown.
fn shape_or_placeholder(shape: &Option<Shape>) -> TokenStream {
    match shape {
        Some(s) if (1..=4).contains(&s.len()) => shape_type(s),
        _ => quote!(::rumus::Shape1<0>),
    }
}

fn dummy_items(item: &syn::ItemStruct, attr: &TokenStream, stop: &Stop) -> TokenStream {
    let k = known(item, attr, stop);
    let inherent = dummy_inherent(&item.ident, &k);
    let traits = dummy_traits(&item.ident, &k);
    quote! {
        #inherent

        #traits
    }
}

/// The inherent consts and methods, forwards typed with what is known.
fn dummy_inherent(name: &syn::Ident, k: &Known) -> TokenStream {
    let forward =
        if k.custom { quote!() } else { typed_method(&format_ident!("forward"), quote!(&self), &k.input, &k.output) };
    let per_field = k.fields.iter().map(|(f, i, o)| typed_method(&format_ident!("forward_{}", f), quote!(&self), i, o));
    let predict = typed_method(&format_ident!("predict"), quote!(&self), &k.input, &k.output);
    let dims = |s: &Option<Shape>| match s {
        Some(s) => dims(s),
        None => quote!([]),
    };
    let (in_dims, out_dims) = (dims(&k.input), dims(&k.output));
    quote! {
        #[allow(unused_variables, dead_code, clippy::all)]
        impl #name {
            pub const INPUT: &'static [usize] = &#in_dims;
            pub const OUTPUT: &'static [usize] = &#out_dims;
            pub const TRAINABLE_PARAMS: usize = 0;
            pub const TOTAL_PARAMS: usize = 0;
            pub fn new(_device: &::rumus::Device, _seed: u64) -> ::rumus::Result<Self> {
                ::core::unimplemented!()
            }
            #forward
            #(#per_field)*
            pub fn summary() -> ::std::string::String {
                ::core::unimplemented!()
            }
            pub fn train(&mut self) -> &mut Self {
                ::core::unimplemented!()
            }
            pub fn eval(&mut self) -> &mut Self {
                ::core::unimplemented!()
            }
            pub fn parameters(&self) -> ::std::vec::Vec<::rumus::nn::Param> {
                ::core::unimplemented!()
            }
            pub fn named_parameters(&self) -> ::std::vec::Vec<(::std::string::String, ::rumus::nn::Param)> {
                ::core::unimplemented!()
            }
            pub fn buffers(&self) -> ::std::vec::Vec<::rumus::nn::Param> {
                ::core::unimplemented!()
            }
            pub fn named_buffers(&self) -> ::std::vec::Vec<(::std::string::String, ::rumus::nn::Param)> {
                ::core::unimplemented!()
            }
            // The `Model` methods, inherent and loosely typed here so that an unknown output
            // shape does not make the caller's dataset look wrong.
            pub fn fit<D, V>(&mut self, _train: &D, _cfg: ::rumus::train::Fit<'_, V>) -> ::rumus::Result<::rumus::train::History> {
                ::core::unimplemented!()
            }
            pub fn evaluate<D>(&self, _data: &D) -> ::rumus::Result<::rumus::train::Evaluation> {
                ::core::unimplemented!()
            }
            #predict
            pub fn save<P>(&self, _path: P) -> ::rumus::Result<()> {
                ::core::unimplemented!()
            }
            pub fn load<P>(&mut self, _path: P) -> ::rumus::Result<()> {
                ::core::unimplemented!()
            }
        }
    }
}

/// `Module`, `Model` and (with a known input) `TakesInput`.
fn dummy_traits(name: &syn::Ident, k: &Known) -> TokenStream {
    let (in_ty, out_ty) = (shape_or_placeholder(&k.input), shape_or_placeholder(&k.output));
    let takes_input = match &k.input {
        Some(_) => quote!(impl ::rumus::__private::TakesInput<#in_ty> for #name {}),
        None => quote!(),
    };
    quote! {
        #[allow(unused_variables)]
        impl ::rumus::nn::Module for #name {
            fn forward_raw(&self, _x: &::rumus::RawTensor) -> ::rumus::Result<::rumus::RawTensor> {
                ::core::unimplemented!()
            }
            fn forward_cached(&self, _x: &::rumus::RawTensor, _cache: &mut ::rumus::nn::KvCache) -> ::rumus::Result<::rumus::RawTensor> {
                ::core::unimplemented!()
            }
            fn visit_params(&self, _prefix: &str, _visitor: &mut dyn FnMut(&str, &::rumus::nn::Param)) {
                ::core::unimplemented!()
            }
            fn set_training(&mut self, _training: bool) {
                ::core::unimplemented!()
            }
            fn describe(&self) -> ::std::string::String {
                ::core::unimplemented!()
            }
        }

        impl ::rumus::Model for #name {
            type Input = #in_ty;
            type Output = #out_ty;
        }

        #takes_input
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proc_macro2::TokenStream;

    /// Names of the items a token stream defines: `fn x`, `const X`, `impl Trait`, `macro`.
    fn surface_names(tokens: TokenStream) -> BTreeSet<String> {
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as items");
        let mut names = BTreeSet::new();
        for it in file.items {
            match it {
                syn::Item::Impl(imp) => {
                    let of = match &imp.trait_ {
                        Some((_, path, _)) => {
                            let t = path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                            names.insert(format!("impl {t}"));
                            format!("{t}::")
                        }
                        None => String::new(),
                    };
                    for ii in imp.items {
                        match ii {
                            syn::ImplItem::Fn(f) => names.insert(format!("fn {of}{}", f.sig.ident)),
                            syn::ImplItem::Const(c) => names.insert(format!("const {of}{}", c.ident)),
                            syn::ImplItem::Type(t) => names.insert(format!("type {of}{}", t.ident)),
                            _ => false,
                        };
                    }
                }
                syn::Item::Struct(s) => {
                    names.insert(format!("struct {}", s.ident));
                }
                syn::Item::Macro(_) => {
                    names.insert("macro".to_string());
                }
                syn::Item::Use(_) => {
                    names.insert("use".to_string());
                }
                _ => {}
            }
        }
        names
    }

    /// The dummies of a failed model define everything the real expansion does, so a model
    /// with an error reports that error only. (If this fails after a change to `generate`,
    /// mirror the new item in `dummy_items`.)
    #[test]
    fn dummies_cover_the_generated_surface() {
        for (attr, ok, bad) in [
            (
                "input = [1, 8, 8]",
                "pub struct Net { a: layers![Conv2d(4, kernel = 3), Flatten], b: layers![Linear(10)] }",
                "pub struct Net { a: layers![Conv2d(4, kernel = 30), Flatten], b: layers![Linear(10)] }",
            ),
            (
                "input = [4], output = [4], forward = custom",
                "struct Net { a: layers![Linear(4)] }",
                "struct Net { a: layers![Linear(4), Lineer(3)] }",
            ),
        ] {
            let real = crate::generate::model(attr.parse().unwrap(), ok.parse().unwrap());
            let dummy = crate::generate::model(attr.parse().unwrap(), bad.parse().unwrap());
            assert!(!real.to_string().contains("compile_error"));
            let dummy_str = dummy.to_string();
            assert_eq!(dummy_str.matches("compile_error").count(), 1, "{dummy_str}");
            let (real_names, dummy_names) = (surface_names(real), surface_names(dummy));
            let missing: Vec<&String> = real_names.difference(&dummy_names).collect();
            assert!(missing.is_empty(), "the dummies lack {missing:?}");
        }
    }

    /// A failed classifier's `forward` is typed with the output its head declares.
    #[test]
    fn guessed_output_follows_the_last_linear_after_a_flatten() {
        let guess = |attr: &str, item: &str| {
            let item: syn::ItemStruct = syn::parse_str(item).unwrap();
            let args = crate::parse::model::parse_args(attr.parse().unwrap()).unwrap();
            super::guess_output(&item, args.input.as_ref().map(|(s, _)| s.as_slice()))
        };
        let lenet = "struct N { f: layers![Conv2d(16, kernel = 5), Flatten], h: layers![Linear(400 => 120), Relu, Linear(10), LogSoftmax] }";
        assert_eq!(guess("input = [1, 12, 12]", lenet), Some(vec![10]));
        assert_eq!(guess("input = [8]", "struct N { h: layers![Linear(3), Dropout(0.1)] }"), Some(vec![3]));
        // A sequence model keeps its time axis, which the head alone does not tell.
        assert_eq!(guess("input = [4, 8]", "struct N { h: layers![Linear(3)] }"), None);
        assert_eq!(guess("input = [8]", "struct N { h: layers![Linear(8), Reshape(2, 4)] }"), Some(vec![2, 4]));
        assert_eq!(guess("input = [8]", "struct N { h: layers![Linear(8), Reshape(2, -1)] }"), None);
    }

    /// A nested model with an error of its own makes the enclosing model poisoned: no second
    /// error, the full surface, and its own callback says poisoned too.
    #[test]
    fn poisoned_nested_model_adds_no_error() {
        let out = crate::generate::resume(
            "[input = [8]] [inner { poisoned = true, name = Inner }] pub struct Outer { a: layers![Linear(8)], inner: Inner, b: layers![Linear(2)] }"
                .parse()
                .unwrap(),
        )
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("poisoned = true"), "{out}");
        assert!(out.contains("fn forward_a < "), "{out}");
        // The field before the nested model keeps its shapes: [8] -> [8].
        assert!(out.contains("fn forward_a < > (& self , _x : & :: rumus :: Tensor < :: rumus :: Shape1 < 8 > >) -> :: rumus :: Result < :: rumus :: Tensor < :: rumus :: Shape1 < 8 > > >"), "{out}");
    }
}
