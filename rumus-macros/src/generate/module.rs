//! The trait impls: `Module` (forwards, PyTorch-named parameter visits, training mode), `Model`
//! and `TakesInput`, and the check that each nested model takes its field's input.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::tokens::shape_type;
use super::{forward, Gen};
use crate::analyse::FieldBody;

pub fn impls(g: &Gen) -> TokenStream {
    let name = &g.item.ident;
    let (in_ty, out_ty) = (shape_type(&g.plan.input), shape_type(&g.plan.output));
    let (forward_raw, forward_cached) = (forward::raw(g), forward::cached(g));
    let visits = g.fields.iter().map(|f| {
        let (fname, key) = (&f.name, f.name.to_string());
        quote!(::rumus::nn::Module::visit_params(&self.#fname, &::rumus::nn::join_name(prefix, #key), visitor);)
    });
    let trainings = g.fields.iter().map(|f| {
        let fname = &f.name;
        quote!(::rumus::nn::Module::set_training(&mut self.#fname, training);)
    });
    let describe = name.to_string();
    quote! {
        impl ::rumus::nn::Module for #name {
            #forward_raw

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
    }
}

/// Second line of defence behind the expansion-time check: each nested type must take its
/// field's input (rustc reports it in shapes through on_unimplemented).
pub fn nested_checks(g: &Gen) -> TokenStream {
    let checks = g.fields().filter_map(|(f, p)| {
        let FieldBody::Nested { path, .. } = &p.body else { return None };
        let (ty, fin) = (&f.ty_tokens, shape_type(&p.input));
        Some(quote_spanned! {ty.span()=>
            const _: () = {
                fn __takes<M: ::rumus::__private::TakesInput<S>, S: ::rumus::Shape>() {}
                let _ = __takes::<#path, #fin>;
            };
        })
    });
    quote!(#(#checks)*)
}
