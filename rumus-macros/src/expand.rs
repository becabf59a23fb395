//! Code generation: the struct with runtime field types, `new`, typed `forward` (and one typed
//! method per field), `Module` and `Model` impls, parameter access, `summary`, and the callback
//! macro through which an enclosing model learns this model's shapes.
//!
//! Generated code is plain: concrete types and `Box<dyn Module>` sequences, no generic
//! machinery, so it costs the compiler little (dfdx#234).

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Error;

use crate::dummies;
use crate::infer::{depth_var, tie_var, LayerOut};
use crate::model::{self, Field, FieldBody, FieldKind, ModelArgs, Plan, Stop};
use crate::spec::lit;
use crate::summary;

/// `#[model(attr)] item`.
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, TokenStream::new(), item)
}

/// `__model_resume! { [attr] [known nested shapes] item }`, re-entered from a nested model's
/// callback macro.
pub fn resume(input: TokenStream) -> TokenStream {
    let mut it = input.into_iter();
    match (it.next(), it.next()) {
        (Some(TokenTree::Group(a)), Some(TokenTree::Group(k)))
            if a.delimiter() == Delimiter::Bracket && k.delimiter() == Delimiter::Bracket =>
        {
            expand(a.stream(), k.stream(), it.collect())
        }
        _ => Error::new(Span::call_site(), "`__model_resume!` is internal to #[model]").to_compile_error(),
    }
}

/// `layers![..]` outside a `#[model]` struct: there is no input shape to infer from.
pub fn layers_alone(input: TokenStream) -> TokenStream {
    let span = input.clone().into_iter().next().map(|t| t.span()).unwrap_or_else(Span::call_site);
    Error::new(
        span,
        "`layers![..]` declares a field of a #[model] struct, e.g.\n#[model(input = [784])]\nstruct Mlp { body: layers![Linear(128), Relu, Linear(10)] }",
    )
    .to_compile_error()
}

fn expand(attr: TokenStream, known: TokenStream, item: TokenStream) -> TokenStream {
    let parsed: syn::ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("#[model] goes on a struct whose fields are layers: {e}");
            return Error::new(e.span(), msg).to_compile_error();
        }
    };
    match expand_struct(&parsed, attr.clone(), known, &item) {
        Ok(ts) => ts,
        // The error, and beside it the struct with everything #[model] would generate, so the
        // only error is this one (not "no function `new`" wherever the model is used).
        Err(stop) => dummies::surface(&parsed, &attr, stop),
    }
}

fn expand_struct(
    item: &syn::ItemStruct,
    attr: TokenStream,
    known: TokenStream,
    raw: &TokenStream,
) -> std::result::Result<TokenStream, Stop> {
    let early = |error: Error| Stop { error: Some(error), done: Vec::new(), next_input: None };
    let args = model::parse_args(attr.clone()).map_err(early)?;
    let fields = model::parse_fields(item).map_err(early)?;
    let known_map = model::parse_known(known.clone()).map_err(early)?;
    // A nested model's shapes are not visible here; its callback macro re-invokes us with them.
    for f in &fields {
        if let FieldKind::Nested(path) = &f.kind {
            if !known_map.contains_key(&f.name.to_string()) {
                return Ok(callback(&f.name, path, &attr, &known, raw));
            }
        }
    }
    let plan = model::plan(item, &args, &fields, &known_map)?;
    Ok(generate(item, &args, &fields, &plan))
}

/// `path! { field [attr] [known] item }`: every #[model] defines a macro of its own name (macros
/// and types live in different namespaces), so the path that names the type names the macro too,
/// through `use`, `pub use`, `super::` or another crate.
fn callback(
    field: &syn::Ident,
    path: &syn::Path,
    attr: &TokenStream,
    known: &TokenStream,
    item: &TokenStream,
) -> TokenStream {
    // If the type is not a #[model] struct the callback does not resolve; this assertion makes
    // rustc also say why, through `Model`'s on_unimplemented message.
    quote_spanned! {path.span()=>
        const _: () = {
            fn __nested_model<M: ::rumus::Model>() {}
            let _ = __nested_model::<#path>;
        };
        #path! { #field [#attr] [#known] #item }
    }
}

/// The macro of the model's name that hands `payload` (its shapes, or `poisoned = true`) to an
/// enclosing #[model]. A `pub` model's macro is `#[macro_export]`ed under a crate-unique name
/// and re-exported beside the struct, so other crates reach it through the struct's path too.
pub fn callback_macro(item: &syn::ItemStruct, payload: TokenStream) -> TokenStream {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = &item.ident;
    let vis = &item.vis;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mac = format_ident!("__rumus_model_{}_{}", name, n);
    let export = if matches!(vis, syn::Visibility::Public(_)) { quote!(#[macro_export]) } else { quote!() };
    quote! {
        // Lets an enclosing #[model] learn this model's shapes at expansion time.
        #[doc(hidden)]
        #export
        #[allow(unused_macros, non_local_definitions)]
        macro_rules! #mac {
            ($field:ident [$($attr:tt)*] [$($known:tt)*] $($item:tt)*) => {
                ::rumus::__model_resume! {
                    [$($attr)*]
                    [$($known)* $field { #payload }]
                    $($item)*
                }
            };
        }
        #[doc(hidden)]
        #[allow(unused_imports, unreachable_pub)]
        #vis use #mac as #name;
    }
}

/// The local of `new` that holds field `key` while the fields are built.
fn field_var(key: &str) -> proc_macro2::Ident {
    // A raw field name (`r#type`) loses its `r#` inside the longer name.
    format_ident!("__rumus_field_{}", key.trim_start_matches("r#"))
}

/// Builds a `layers![..]` field into its local: each layer pushed in order, and the weight of
/// every Embedding that a later `Linear(.., tie = ..)` shares bound to its tie variable.
fn build_list(key: &str, outs: &[LayerOut], tied: &[(String, usize)]) -> TokenStream {
    let local = field_var(key);
    let pushes = outs.iter().enumerate().map(|(j, o)| {
        let ctor = &o.ctor;
        if tied.iter().any(|(f, i)| f == key && *i == j) {
            let var = tie_var(key, j);
            quote! {
                let layer = #ctor;
                let #var = ::core::clone::Clone::clone(&layer.weight);
                #local.push(::std::boxed::Box::new(layer));
            }
        } else {
            quote!(#local.push(::std::boxed::Box::new(#ctor));)
        }
    });
    quote! {
        let mut #local = ::rumus::nn::Sequential::new();
        #(#pushes)*
    }
}

/// The start of `forward_raw` of a sequence model (its input is token ids `[T]` read by an
/// Embedding, or vectors `[T, E]`): a batch of shorter sequences `[batch, t, ..]`, `1 ≤ t < T`,
/// runs through the fields untyped, as nanoGPT's forward runs on a prompt shorter than the block
/// (`generate_uncached`). Every other shape takes the typed path, which checks it.
fn shorter_sequence(input: &[usize], raw_chain: &[TokenStream]) -> TokenStream {
    let dims = dims_tokens(input);
    quote! {
        let input: &[usize] = &#dims;
        let got = x.shape();
        if got.len() == input.len() + 1 && got[1] >= 1 && got[1] < input[0] && got[2..] == input[1..] {
            let mut h = ::core::clone::Clone::clone(x);
            #(#raw_chain)*
            return ::core::result::Result::Ok(h);
        }
    }
}

/// `Module::forward_cached`: with the generated forward, the fields' layers in order, each with
/// its own `forward_cached`, after checking that `x` holds new positions that fit the model's
/// sequence length; with a custom forward, an error (the macro cannot know how the custom
/// forward combines the fields).
fn forward_cached(name: &str, custom: bool, input: &[usize], cached: &[TokenStream]) -> TokenStream {
    let op = format!("{name}::forward_cached");
    if custom {
        let detail = format!(
            "{name} has `#[model(forward = custom)]`, so #[model] cannot derive its incremental (cached) decoding: run the whole sequence with `forward_raw`, or implement `forward_cached` on a type that holds the model and runs the fields' `forward_cached` as the custom forward combines them"
        );
        return quote! {
            fn forward_cached(&self, _x: &::rumus::RawTensor, _cache: &mut ::rumus::nn::KvCache) -> ::rumus::Result<::rumus::RawTensor> {
                ::core::result::Result::Err(::rumus::Error::InvalidArgument {
                    op: #op,
                    detail: ::std::string::String::from(#detail),
                })
            }
        };
    }
    let dims = dims_tokens(input);
    let len = lit(input.first().copied().unwrap_or(1));
    let rest: String = input.iter().skip(1).map(|d| format!(", {d}")).collect();
    let expected = format!(
        "[batch, t{rest}] with t ≥ 1 new positions, and the cache's {{}} positions plus t at most {} (the model's sequence length)",
        input.first().copied().unwrap_or(1)
    );
    quote! {
        fn forward_cached(&self, x: &::rumus::RawTensor, cache: &mut ::rumus::nn::KvCache) -> ::rumus::Result<::rumus::RawTensor> {
            let input: &[usize] = &#dims;
            let got = x.shape();
            let fits = got.len() == input.len() + 1
                && got[2..] == input[1..]
                && got[1] >= 1
                && cache.position().checked_add(got[1]).is_some_and(|end| end <= #len);
            if !fits {
                return ::core::result::Result::Err(::rumus::Error::Shape {
                    op: #op,
                    detail: ::std::format!(::core::concat!("expects ", #expected, ", got {:?}"), cache.position(), got),
                });
            }
            let mut h = ::core::clone::Clone::clone(x);
            #(#cached)*
            ::core::result::Result::Ok(h)
        }
    }
}

/// `Shape3<1, 28, 28>`; `plan` has checked the rank is 1 to 4.
pub fn shape_type(s: &[usize]) -> TokenStream {
    let d: Vec<proc_macro2::Literal> = s.iter().map(|x| lit(*x)).collect();
    match d.as_slice() {
        [a] => quote!(::rumus::Shape1<#a>),
        [a, b] => quote!(::rumus::Shape2<#a, #b>),
        [a, b, c] => quote!(::rumus::Shape3<#a, #b, #c>),
        [a, b, c, e] => quote!(::rumus::Shape4<#a, #b, #c, #e>),
        _ => quote!(::core::compile_error!("rumus: typed tensors have rank 1 to 4")),
    }
}

pub fn dims_tokens(s: &[usize]) -> TokenStream {
    let d = s.iter().map(|x| lit(*x));
    quote!([#(#d),*])
}

fn generate(item: &syn::ItemStruct, args: &ModelArgs, fields: &[Field], plan: &Plan) -> TokenStream {
    let name = &item.ident;
    let vis = &item.vis;
    let attrs = &item.attrs;
    let in_ty = shape_type(&plan.input);
    let out_ty = shape_type(&plan.output);
    let (in_dims, out_dims) = (dims_tokens(&plan.input), dims_tokens(&plan.output));
    let trainable = plan.trainable as usize;
    let total = plan.trainable.saturating_add(plan.buffers) as usize;
    let table = summary::render(&name.to_string(), fields, plan);

    let mut decls = Vec::new();
    let mut builds = Vec::new();
    let mut inits = Vec::new();
    let mut cached = Vec::new();
    let mut raw_chain = Vec::new();
    let mut methods = Vec::new();
    let mut visits = Vec::new();
    let mut trainings = Vec::new();
    let mut checks = Vec::new();
    let mut chain = Vec::new();
    for (i, (f, p)) in fields.iter().zip(&plan.fields).enumerate() {
        let (fname, fvis, fattrs) = (&f.name, &f.vis, &f.attrs);
        let key = fname.to_string();
        let (fin, fout) = (shape_type(&p.input), shape_type(&p.output));
        let method = format_ident!("forward_{}", fname);
        let doc = format!(
            "Runs field `{key}` alone: {} → {} per sample.",
            crate::spec::fmt_shape(&p.input),
            crate::spec::fmt_shape(&p.output)
        );
        match &p.body {
            FieldBody::Layers(outs) => {
                decls.push(quote!(#(#fattrs)* #fvis #fname: ::rumus::nn::Sequential));
                builds.push(build_list(&key, outs, &plan.tied));
                let local = field_var(&key);
                inits.push(quote!(#fname: #local));
                cached.push(quote! {
                    for layer in self.#fname.layers() {
                        h = ::rumus::nn::Module::forward_cached(&**layer, &h, cache)?;
                    }
                });
                raw_chain.push(quote!(h = ::rumus::nn::Module::forward_raw(&self.#fname, &h)?;));
                methods.push(quote! {
                    #[doc = #doc]
                    pub fn #method(&self, x: &::rumus::Tensor<#fin>) -> ::rumus::Result<::rumus::Tensor<#fout>> {
                        ::rumus::Tensor::from_raw(::rumus::nn::Module::forward_raw(&self.#fname, x.raw())?)
                    }
                });
            }
            FieldBody::Nested { path, seed, .. } => {
                decls.push(quote!(#(#fattrs)* #fvis #fname: #path));
                let local = field_var(&key);
                builds.push(quote!(let #local = <#path>::new(device, #seed)?;));
                inits.push(quote!(#fname: #local));
                cached.push(quote!(h = ::rumus::nn::Module::forward_cached(&self.#fname, &h, cache)?;));
                raw_chain.push(quote!(h = ::rumus::nn::Module::forward_raw(&self.#fname, &h)?;));
                methods.push(quote! {
                    #[doc = #doc]
                    pub fn #method(&self, x: &::rumus::Tensor<#fin>) -> ::rumus::Result<::rumus::Tensor<#fout>> {
                        self.#fname.forward(x)
                    }
                });
                // Second line of defence behind the expansion-time check: the nested type must
                // take this input (rustc reports it in shapes through on_unimplemented).
                let ty = &f.ty_tokens;
                checks.push(quote_spanned! {ty.span()=>
                    const _: () = {
                        fn __takes<M: ::rumus::__private::TakesInput<S>, S: ::rumus::Shape>() {}
                        let _ = __takes::<#path, #fin>;
                    };
                });
            }
        }
        visits.push(
            quote!(::rumus::nn::Module::visit_params(&self.#fname, &::rumus::nn::join_name(prefix, #key), visitor);),
        );
        trainings.push(quote!(::rumus::nn::Module::set_training(&mut self.#fname, training);));
        let h = format_ident!("h{}", i);
        let arg = if i == 0 {
            quote!(x)
        } else {
            let prev = format_ident!("h{}", i - 1);
            quote!(&#prev)
        };
        chain.push(quote!(let #h = self.#method(#arg)?;));
    }
    let last = format_ident!("h{}", fields.len().saturating_sub(1));
    let forward = if args.custom {
        quote!()
    } else {
        let doc = format!(
            "Runs the model: {} → {} per sample (the batch axis is dynamic).",
            crate::spec::fmt_shape(&plan.input),
            crate::spec::fmt_shape(&plan.output)
        );
        quote! {
            #[doc = #doc]
            pub fn forward(&self, x: &::rumus::Tensor<#in_ty>) -> ::rumus::Result<::rumus::Tensor<#out_ty>> {
                #(#chain)*
                ::core::result::Result::Ok(#last)
            }
        }
    };
    let (t128, b128, indices) = (plan.trainable, plan.buffers, plan.indices);
    let callback = callback_macro(
        item,
        quote!(input = #in_dims, output = #out_dims, trainable = #t128, buffers = #b128, name = #name, indices = #indices),
    );
    let name_str = name.to_string();
    let describe = name_str.clone();
    let forward_cached = forward_cached(&name_str, args.custom, &plan.input, &cached);
    let sequence = !args.custom && (plan.indices || plan.input.len() == 2);
    let shorter = sequence.then(|| shorter_sequence(&plan.input, &raw_chain));
    let depth = (plan.attention_layers > 0).then(|| {
        let (var, n) = (depth_var(), lit(plan.attention_layers));
        // The `depth` of every attention layer's residual-projection init (GPT-2's
        // `std / sqrt(2 · layers)`): the attention layers of this model, Repeat copies included.
        quote!(let #var: usize = #n;)
    });

    quote! {
        #(#attrs)*
        #vis struct #name {
            #(#decls,)*
        }

        impl #name {
            /// Per-sample input shape.
            pub const INPUT: &'static [usize] = &#in_dims;
            /// Per-sample output shape.
            pub const OUTPUT: &'static [usize] = &#out_dims;
            /// Trainable scalars, counted at compile time.
            pub const TRAINABLE_PARAMS: usize = #trainable;
            /// Trainable scalars plus buffers (batch-norm running statistics).
            pub const TOTAL_PARAMS: usize = #total;

            /// Builds the model on `device`; every layer's initialisation is derived from `seed`.
            pub fn new(device: &::rumus::Device, seed: u64) -> ::rumus::Result<Self> {
                #depth
                #(#builds)*
                ::core::result::Result::Ok(#name { #(#inits,)* })
            }

            #forward

            #(#methods)*

            /// A Keras-style table of layers, output shapes and parameter counts.
            pub fn summary() -> ::std::string::String {
                ::std::string::String::from(#table)
            }

            /// Switches to training behaviour (dropout on, batch-norm batch statistics).
            pub fn train(&mut self) -> &mut Self {
                ::rumus::nn::Module::set_training(self, true);
                self
            }

            /// Switches to inference behaviour.
            pub fn eval(&mut self) -> &mut Self {
                ::rumus::nn::Module::set_training(self, false);
                self
            }

            /// Trainable parameters, in PyTorch's order; a tied weight once. No buffers.
            pub fn parameters(&self) -> ::std::vec::Vec<::rumus::nn::Param> {
                ::rumus::nn::named_parameters(self).into_iter().map(|(_, p)| p).collect()
            }

            /// Trainable parameters with PyTorch-style names (`features.0.weight`).
            pub fn named_parameters(&self) -> ::std::vec::Vec<(::std::string::String, ::rumus::nn::Param)> {
                ::rumus::nn::named_parameters(self)
            }

            /// Buffers (batch-norm running statistics), in PyTorch's order.
            pub fn buffers(&self) -> ::std::vec::Vec<::rumus::nn::Param> {
                ::rumus::nn::named_buffers(self).into_iter().map(|(_, p)| p).collect()
            }

            /// Buffers with PyTorch-style names (`body.1.running_mean`).
            pub fn named_buffers(&self) -> ::std::vec::Vec<(::std::string::String, ::rumus::nn::Param)> {
                ::rumus::nn::named_buffers(self)
            }
        }

        impl ::rumus::nn::Module for #name {
            fn forward_raw(&self, x: &::rumus::RawTensor) -> ::rumus::Result<::rumus::RawTensor> {
                #shorter
                // The typed path checks the per-sample shape of untyped input.
                let x = ::rumus::Tensor::<#in_ty>::from_raw(::core::clone::Clone::clone(x))?;
                ::core::result::Result::Ok(self.forward(&x)?.into_raw())
            }

            #forward_cached

            fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &::rumus::nn::Param)) {
                #(#visits)*
            }

            fn set_training(&mut self, training: bool) {
                #(#trainings)*
            }

            fn describe(&self) -> ::std::string::String {
                ::std::string::String::from(#describe)
            }
        }

        impl ::rumus::Model for #name {
            type Input = #in_ty;
            type Output = #out_ty;
        }

        impl ::rumus::__private::TakesInput<#in_ty> for #name {}

        #(#checks)*

        #callback
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const LENET: &str = "pub struct LeNet { features: layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)], head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)] }";

    #[test]
    fn lenet_plan_counts_61706_params_and_docs_show_its_summary() {
        let item: syn::ItemStruct = syn::parse_str(LENET).unwrap();
        let args = model::parse_args("input = [1, 28, 28]".parse().unwrap()).unwrap();
        let fields = model::parse_fields(&item).unwrap();
        let plan = model::plan(&item, &args, &fields, &HashMap::new()).unwrap();
        assert_eq!(plan.trainable, 61_706);
        assert_eq!(plan.output, vec![10]);
        assert_eq!(plan.fields[0].output, vec![16, 5, 5]);
        let table = summary::render("LeNet", &fields, &plan);
        assert!(include_str!("../../docs/DSL.md").contains(&table), "docs/DSL.md shows a stale summary:\n{table}");
    }

    const GPT: &str = "pub struct Gpt { embed: layers![Embedding(84, 384, std = 0.02), PositionalEmbedding(256), Dropout(0.2)], blocks: layers![Repeat(6, TransformerBlock(6, dropout = 0.2))], head: layers![LayerNorm, Linear(84, bias = false, tie = embed.0)] }";

    fn plan_of(attr: &str, src: &str) -> (Vec<Field>, std::result::Result<Plan, Stop>) {
        let item: syn::ItemStruct = syn::parse_str(src).unwrap();
        let args = model::parse_args(attr.parse().unwrap()).unwrap();
        let fields = model::parse_fields(&item).unwrap();
        let plan = model::plan(&item, &args, &fields, &HashMap::new());
        (fields, plan)
    }

    /// nanoGPT's shakespeare_char model: 10,778,112 parameters with the tied head counted once
    /// (nanoGPT prints 10.68M because it leaves out the position embeddings).
    #[test]
    fn gpt_plan_counts_the_tied_weight_once_and_docs_show_its_summary() {
        let (fields, plan) = plan_of("input = [256]", GPT);
        let plan = plan.unwrap();
        let e = 384u128;
        let block = 12 * e * e + 13 * e;
        assert_eq!(plan.trainable, 84 * e + 256 * e + 6 * block + 2 * e);
        assert_eq!(plan.trainable, 10_778_112);
        assert_eq!(plan.output, vec![256, 84]);
        assert_eq!(plan.attention_layers, 6);
        assert_eq!(plan.tied, vec![("embed".to_string(), 0)]);
        let table = summary::render("Gpt", &fields, &plan);
        for i in 0..6 {
            assert!(table.contains(&format!(" blocks.{i} (TransformerBlock)")), "{table}");
        }
        assert!(!table.contains("blocks.6"), "{table}");
        assert!(include_str!("../../docs/DSL.md").contains(&table), "docs/DSL.md shows a stale summary:\n{table}");
    }

    #[test]
    fn gpt_expansion_builds_the_tie_and_the_depth_and_chains_forward_cached() {
        let out = model("input = [256]".parse().unwrap(), GPT.parse().unwrap()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            out.contains("let __rumus_tie_embed_0 = :: core :: clone :: Clone :: clone (& layer . weight)"),
            "{out}"
        );
        assert!(out.contains("layer . weight = :: core :: clone :: Clone :: clone (& __rumus_tie_embed_0)"), "{out}");
        assert!(out.contains("let __rumus_attention_layers : usize = 6"), "{out}");
        assert_eq!(out.matches(":: rumus :: nn :: TransformerBlock :: new").count(), 6);
        assert!(out.contains("fn forward_cached"), "{out}");
        // A custom forward gets an explaining error instead.
        let custom = model(
            "input = [16], output = [16, 8], forward = custom".parse().unwrap(),
            "struct C { e: layers![Embedding(10, 8)] }".parse().unwrap(),
        )
        .to_string();
        assert!(custom.contains("cannot derive its incremental (cached) decoding"), "{custom}");
    }

    /// Field names become parts of local names in `new`; a raw identifier must not panic there.
    #[test]
    fn raw_field_names_expand() {
        let out = model(
            "input = [8]".parse().unwrap(),
            "struct R { r#type: layers![Embedding(10, 4)], r#loop: layers![Linear(10, tie = r#type.0)] }"
                .parse()
                .unwrap(),
        )
        .to_string();
        assert!(out.contains("__rumus_field_type"), "{out}");
    }

    /// Not an assertion on time (timings do not belong in tests); run with `--nocapture` to see it.
    #[test]
    fn expansion_time_of_lenet() {
        let (attr, item): (TokenStream, TokenStream) = ("input = [1, 28, 28]".parse().unwrap(), LENET.parse().unwrap());
        let runs = 200;
        let start = std::time::Instant::now();
        let mut len = 0;
        for _ in 0..runs {
            len += model(attr.clone(), item.clone()).to_string().len();
        }
        let per = start.elapsed() / runs;
        println!(
            "expanding LeNet-5 (parse + infer + generate + stringify): {per:?} per expansion ({} bytes)",
            len / runs as usize
        );
        assert!(len > 0);
    }

    #[test]
    #[ignore = "writes the LeNet expansion to $RUMUS_DUMP for reading"]
    fn dump_lenet_expansion() {
        let out = model("input = [1, 28, 28]".parse().unwrap(), LENET.parse().unwrap());
        if let Ok(path) = std::env::var("RUMUS_DUMP") {
            std::fs::write(path, out.to_string()).unwrap();
        }
    }
}
