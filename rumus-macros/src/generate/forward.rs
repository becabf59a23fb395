//! The forward passes: the typed `forward` (fields chained in order) and one typed
//! `forward_<field>` per field; `Module::forward_raw` (untyped, shorter sequences allowed) and
//! `Module::forward_cached` (incremental decoding).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::tokens::{dims, lit, shape_type};
use super::Gen;
use crate::analyse::plan::FieldPlan;
use crate::analyse::FieldBody;
use crate::parse::model::Field;
use crate::spec::fmt_shape;

/// `forward`, the fields chained in order; nothing with a custom forward (the user writes it).
pub fn typed(g: &Gen) -> TokenStream {
    if g.args.custom {
        return quote!();
    }
    let (plan, n) = (g.plan, g.fields.len());
    let chain = g.fields.iter().enumerate().map(|(i, f)| {
        let (h, method) = (format_ident!("h{}", i), format_ident!("forward_{}", f.name));
        let arg = if i == 0 {
            quote!(x)
        } else {
            let prev = format_ident!("h{}", i - 1);
            quote!(&#prev)
        };
        quote!(let #h = self.#method(#arg)?;)
    });
    let last = format_ident!("h{}", n.saturating_sub(1));
    let (in_ty, out_ty) = (shape_type(&plan.input), shape_type(&plan.output));
    let doc = format!(
        "Runs the model: {} → {} per sample (the batch axis is dynamic).",
        fmt_shape(&plan.input),
        fmt_shape(&plan.output)
    );
    quote! {
        #[doc = #doc]
        pub fn forward(&self, x: &::rumus::Tensor<#in_ty>) -> ::rumus::Result<::rumus::Tensor<#out_ty>> {
            #(#chain)*
            ::core::result::Result::Ok(#last)
        }
    }
}

/// `forward_<field>`: the field alone, typed with its shapes.
pub fn field_method(f: &Field, p: &FieldPlan) -> TokenStream {
    let fname = &f.name;
    let (fin, fout) = (shape_type(&p.input), shape_type(&p.output));
    let method = format_ident!("forward_{}", fname);
    let doc = format!("Runs field `{fname}` alone: {} → {} per sample.", fmt_shape(&p.input), fmt_shape(&p.output));
    let body = match &p.body {
        FieldBody::Layers(_) => {
            quote!(::rumus::Tensor::from_raw(::rumus::nn::Module::forward_raw(&self.#fname, x.raw())?))
        }
        FieldBody::Nested { .. } => quote!(self.#fname.forward(x)),
    };
    quote! {
        #[doc = #doc]
        pub fn #method(&self, x: &::rumus::Tensor<#fin>) -> ::rumus::Result<::rumus::Tensor<#fout>> {
            #body
        }
    }
}

/// `Module::forward_raw`: a sequence model first takes shorter sequences untyped; everything
/// else goes through the typed path, which checks the per-sample shape.
pub fn raw(g: &Gen) -> TokenStream {
    let in_ty = shape_type(&g.plan.input);
    let sequence = !g.args.custom && (g.plan.indices || g.plan.input.len() == 2);
    let shorter = sequence.then(|| {
        let chain = g.fields.iter().map(|f| {
            let fname = &f.name;
            quote!(h = ::rumus::nn::Module::forward_raw(&self.#fname, &h)?;)
        });
        shorter_sequence(&g.plan.input, chain)
    });
    quote! {
        fn forward_raw(&self, x: &::rumus::RawTensor) -> ::rumus::Result<::rumus::RawTensor> {
            #shorter
            // The typed path checks the per-sample shape of untyped input.
            let x = ::rumus::Tensor::<#in_ty>::from_raw(::core::clone::Clone::clone(x))?;
            ::core::result::Result::Ok(self.forward(&x)?.into_raw())
        }
    }
}

/// The start of `forward_raw` of a sequence model (its input is token ids `[T]` read by an
/// Embedding, or vectors `[T, E]`): a batch of shorter sequences `[batch, t, ..]`, `1 ≤ t < T`,
/// runs through the fields untyped, as nanoGPT's forward runs on a prompt shorter than the block
/// (`generate_uncached`). Every other shape takes the typed path, which checks it.
fn shorter_sequence(input: &[usize], raw_chain: impl Iterator<Item = TokenStream>) -> TokenStream {
    let dims = dims(input);
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

/// `Module::forward_cached` of the model.
pub fn cached(g: &Gen) -> TokenStream {
    let steps: Vec<TokenStream> = g.fields().map(|(f, p)| cached_step(f, p)).collect();
    forward_cached(&g.item.ident.to_string(), g.args.custom, &g.plan.input, &steps)
}

/// One field's step of `forward_cached`: each layer's own, or the nested model's.
fn cached_step(f: &Field, p: &FieldPlan) -> TokenStream {
    let fname = &f.name;
    match &p.body {
        FieldBody::Layers(_) => quote! {
            for layer in self.#fname.layers() {
                h = ::rumus::nn::Module::forward_cached(&**layer, &h, cache)?;
            }
        },
        FieldBody::Nested { .. } => quote!(h = ::rumus::nn::Module::forward_cached(&self.#fname, &h, cache)?;),
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
    let dims = dims(input);
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
