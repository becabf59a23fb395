//! `impl Model { .. }`: the shape and parameter consts, `new`, the typed forwards, `summary()`,
//! `train`/`eval` and parameter access.

use proc_macro2::TokenStream;
use quote::quote;

use super::tokens::dims;
use super::{forward, new, Gen};
use crate::summary;

pub fn block(g: &Gen) -> TokenStream {
    let name = &g.item.ident;
    let consts = consts(g);
    let new = new::constructor(g);
    let forward = forward::typed(g);
    let per_field = g.fields().map(|(f, p)| forward::field_method(f, p));
    let access = access(g);
    quote! {
        impl #name {
            #consts
            #new
            #forward
            #(#per_field)*
            #access
        }
    }
}

/// `INPUT`, `OUTPUT`, `TRAINABLE_PARAMS`, `TOTAL_PARAMS`.
fn consts(g: &Gen) -> TokenStream {
    let (in_dims, out_dims) = (dims(&g.plan.input), dims(&g.plan.output));
    let trainable = g.plan.trainable as usize;
    let total = g.plan.trainable.saturating_add(g.plan.buffers) as usize;
    quote! {
        /// Per-sample input shape.
        pub const INPUT: &'static [usize] = &#in_dims;
        /// Per-sample output shape.
        pub const OUTPUT: &'static [usize] = &#out_dims;
        /// Trainable scalars, counted at compile time.
        pub const TRAINABLE_PARAMS: usize = #trainable;
        /// Trainable scalars plus buffers (batch-norm running statistics).
        pub const TOTAL_PARAMS: usize = #total;
    }
}

/// `summary()`, `train`/`eval`, parameters and buffers (through `Module::visit_params`).
fn access(g: &Gen) -> TokenStream {
    let table = summary::render(&g.item.ident.to_string(), g.fields, g.plan);
    quote! {
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
}
