//! Code generation, the only part of the macro that emits tokens: from the typed plan, the
//! struct with runtime field types, `new`, typed `forward` (and one typed method per field),
//! `Module` and `Model` impls, parameter access, `summary`, and the callback macro through which
//! an enclosing model learns this model's shapes. One small generator per concern:
//! [`new`] (constructor, with [`layer`] giving each layer's constructor), [`forward`],
//! [`inherent`] (consts and methods), [`module`] (trait impls), [`callback`], and [`dummies`]
//! for a model that failed.
//!
//! Generated code is plain: concrete types and `Box<dyn Module>` sequences, no generic
//! machinery, so it costs the compiler little (dfdx#234).

mod callback;
mod dummies;
mod forward;
mod inherent;
mod layer;
mod module;
mod new;
mod tokens;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::quote;
use syn::Error;

use crate::analyse::{self, plan::FieldPlan, Plan, Stop};
use crate::parse::model::{parse_args, parse_fields, parse_known, Field, FieldKind, ModelArgs};
use tokens::dims;

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
    let args = parse_args(attr.clone()).map_err(early)?;
    let fields = parse_fields(item).map_err(early)?;
    let known_map = parse_known(known.clone()).map_err(early)?;
    // A nested model's shapes are not visible here; its callback macro re-invokes us with them.
    for f in &fields {
        if let FieldKind::Nested(path) = &f.kind {
            if !known_map.contains_key(&f.name.to_string()) {
                return Ok(callback::callback(&f.name, path, &attr, &known, raw));
            }
        }
    }
    let plan = analyse::plan(item, &args, &fields, &known_map)?;
    Ok(generate(&Gen { item, args: &args, fields: &fields, plan: &plan }))
}

/// What every generator reads: the struct as written, its arguments and fields, and its plan.
pub struct Gen<'a> {
    pub item: &'a syn::ItemStruct,
    pub args: &'a ModelArgs,
    pub fields: &'a [Field],
    pub plan: &'a Plan,
}

impl Gen<'_> {
    /// Each field with its plan.
    pub fn fields(&self) -> impl Iterator<Item = (&Field, &FieldPlan)> {
        self.fields.iter().zip(&self.plan.fields)
    }
}

fn generate(g: &Gen) -> TokenStream {
    let declaration = declaration(g);
    let inherent = inherent::block(g);
    let impls = module::impls(g);
    let checks = module::nested_checks(g);
    let callback = callback_of(g);
    quote! {
        #declaration

        #inherent

        #impls

        #checks

        #callback
    }
}

/// The struct as written, each field with its runtime type: a layer list is a `Sequential`.
fn declaration(g: &Gen) -> TokenStream {
    let (name, vis, attrs) = (&g.item.ident, &g.item.vis, &g.item.attrs);
    let decls = g.fields().map(|(f, p)| {
        let (fname, fvis, fattrs) = (&f.name, &f.vis, &f.attrs);
        match &p.body {
            analyse::FieldBody::Layers(_) => quote!(#(#fattrs)* #fvis #fname: ::rumus::nn::Sequential),
            analyse::FieldBody::Nested { path, .. } => quote!(#(#fattrs)* #fvis #fname: #path),
        }
    });
    quote! {
        #(#attrs)*
        #vis struct #name {
            #(#decls,)*
        }
    }
}

/// This model's callback macro, carrying its shapes and counts to an enclosing model.
fn callback_of(g: &Gen) -> TokenStream {
    let (name, plan) = (&g.item.ident, g.plan);
    let (in_dims, out_dims) = (dims(&plan.input), dims(&plan.output));
    let (t128, b128, indices) = (plan.trainable, plan.buffers, plan.indices);
    callback::callback_macro(
        g.item,
        quote!(input = #in_dims, output = #out_dims, trainable = #t128, buffers = #b128, name = #name, indices = #indices),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::analyse::plan::LayerRef;
    use crate::summary;

    const LENET: &str = "pub struct LeNet { features: layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)], head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)] }";

    #[test]
    fn lenet_plan_counts_61706_params_and_docs_show_its_summary() {
        let item: syn::ItemStruct = syn::parse_str(LENET).unwrap();
        let args = parse_args("input = [1, 28, 28]".parse().unwrap()).unwrap();
        let fields = parse_fields(&item).unwrap();
        let plan = analyse::plan(&item, &args, &fields, &HashMap::new()).unwrap();
        assert_eq!(plan.trainable, 61_706);
        assert_eq!(plan.output, vec![10]);
        assert_eq!(plan.fields[0].output, vec![16, 5, 5]);
        let table = summary::render("LeNet", &fields, &plan);
        assert!(include_str!("../../../docs/DSL.md").contains(&table), "docs/DSL.md shows a stale summary:\n{table}");
    }

    const GPT: &str = "pub struct Gpt { embed: layers![Embedding(84, 384, std = 0.02), PositionalEmbedding(256), Dropout(0.2)], blocks: layers![Repeat(6, TransformerBlock(6, dropout = 0.2))], head: layers![LayerNorm, Linear(84, bias = false, tie = embed.0)] }";

    fn plan_of(attr: &str, src: &str) -> (Vec<Field>, std::result::Result<Plan, Stop>) {
        let item: syn::ItemStruct = syn::parse_str(src).unwrap();
        let args = parse_args(attr.parse().unwrap()).unwrap();
        let fields = parse_fields(&item).unwrap();
        let plan = analyse::plan(&item, &args, &fields, &HashMap::new());
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
        assert_eq!(plan.tied, vec![LayerRef { field: "embed".to_string(), index: 0 }]);
        let table = summary::render("Gpt", &fields, &plan);
        for i in 0..6 {
            assert!(table.contains(&format!(" blocks.{i} (TransformerBlock)")), "{table}");
        }
        assert!(!table.contains("blocks.6"), "{table}");
        assert!(include_str!("../../../docs/DSL.md").contains(&table), "docs/DSL.md shows a stale summary:\n{table}");
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

    const BLOCKS: &str = "pub struct Net { stem: layers![Conv2d(4, 3, padding = 1, bias = false), BatchNorm2d, Relu], blocks: layers![Residual(Conv2d(4, 3, padding = 1), BatchNorm2d, Relu, Conv2d(4, 3, padding = 1), BatchNorm2d, shortcut = (Conv2d(4, 1), BatchNorm2d)), Relu, BatchNorm2d, Flatten, Relu, Linear(8), BatchNorm1d, Relu] }";

    /// The peephole: a batch norm right before `Relu` is built with it (`push_with_relu`, or
    /// `with_relu` inside a Residual), so the forward runs one fused op; a batch norm followed
    /// by anything else, and a `Relu` after anything else, are built alone. The plan (names,
    /// counts, summary) does not see it.
    #[test]
    fn a_batch_norm_before_relu_is_built_with_it() {
        let out = model("input = [3, 4, 4]".parse().unwrap(), BLOCKS.parse().unwrap()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        let fused_push = "push_with_relu (:: std :: boxed :: Box :: new (:: rumus :: nn :: BatchNorm";
        assert_eq!(out.matches(fused_push).count(), 2, "the stem's BatchNorm2d and the BatchNorm1d: {out}");
        assert_eq!(out.matches(". with_relu (:: rumus :: nn :: BatchNorm2d").count(), 1, "{out}");
        // The Relu after the Flatten stays a layer of its own (the one after the Residual is
        // built with it: `a_residual_before_relu_is_built_with_it`).
        assert_eq!(out.matches(":: rumus :: nn :: Relu").count(), 1, "{out}");
        assert_eq!(out.matches(":: rumus :: nn :: BatchNorm2d :: new").count(), 5, "{out}");
        let (fields, plan) = plan_of("input = [3, 4, 4]", BLOCKS);
        let table = summary::render("Net", &fields, &plan.unwrap());
        for row in [" stem.1 (BatchNorm2d)", " stem.2 (Relu)", " blocks.1 (Relu)", " blocks.7 (Relu)"] {
            assert!(table.contains(row), "{row} in {table}");
        }
    }

    const RESIDUALS: &str = "pub struct Res { body: layers![Conv2d(4, 3, padding = 1), Residual(Conv2d(4, 3, padding = 1), BatchNorm2d, Relu, Conv2d(4, 3, padding = 1), BatchNorm2d), Relu, Residual(Conv2d(4, 3, padding = 1), shortcut = (Conv2d(4, 1))), Relu, Residual(Residual(Conv2d(4, 3, padding = 1)), Relu, Conv2d(4, 3, padding = 1)), MaxPool2d(2), Relu, Flatten, Linear(3)] }";

    /// The peephole pairs a `Residual` with the `Relu` after it too (its sum and the ReLU in
    /// one op, ResNet's block): identity and projection shortcut alike, in a field's list
    /// (`push_with_relu`) and inside another Residual (`with_relu`); a Residual followed by
    /// anything else is built alone. The plan does not see it.
    #[test]
    fn a_residual_before_relu_is_built_with_it() {
        let out = model("input = [3, 4, 4]".parse().unwrap(), RESIDUALS.parse().unwrap()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        let fused =
            |ctor: &str| format!("push_with_relu (:: std :: boxed :: Box :: new (:: rumus :: nn :: Residual :: {ctor}");
        assert_eq!(out.matches(&fused("new")).count(), 1, "body.1: {out}");
        assert_eq!(out.matches(&fused("with_shortcut")).count(), 1, "body.3: {out}");
        assert_eq!(out.matches(". with_relu (:: rumus :: nn :: Residual :: new").count(), 1, "inside body.5: {out}");
        let alone = "push (:: std :: boxed :: Box :: new (:: rumus :: nn :: Residual :: new";
        assert_eq!(out.matches(alone).count(), 1, "body.5, before MaxPool2d: {out}");
        // The batch norm inside body.1 is paired as well; the Relu after MaxPool2d stays alone.
        assert_eq!(out.matches(". with_relu (:: rumus :: nn :: BatchNorm2d").count(), 1, "{out}");
        assert_eq!(out.matches(":: rumus :: nn :: Relu").count(), 1, "{out}");
        let (fields, plan) = plan_of("input = [3, 4, 4]", RESIDUALS);
        let table = summary::render("Res", &fields, &plan.unwrap());
        for row in [" body.1 (Residual)", " body.2 (Relu)", " body.4 (Relu)", " body.7 (Relu)"] {
            assert!(table.contains(row), "{row} in {table}");
        }
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
