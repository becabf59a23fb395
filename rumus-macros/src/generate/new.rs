//! `new(&Device, seed)`: every field built into a local in declaration order (a layer list layer
//! by layer, a nested model through its own `new`), then the struct from the locals.

use proc_macro2::TokenStream;
use quote::quote;

use super::layer::ctor;
use super::tokens::{depth_var, field_var, lit, seed, tie_var};
use super::Gen;
use crate::analyse::plan::{FieldPlan, LayerRef};
use crate::analyse::{fuse, FieldBody, Layer};
use crate::parse::model::Field;

pub fn constructor(g: &Gen) -> TokenStream {
    let name = &g.item.ident;
    let depth = depth(g.plan.attention_layers);
    let builds = g.fields().map(|(f, p)| build(f, p, &g.plan.tied));
    let inits = g.fields.iter().map(|f| {
        let (fname, local) = (&f.name, field_var(&f.name.to_string()));
        quote!(#fname: #local)
    });
    quote! {
        /// Builds the model on `device`; every layer's initialisation is derived from `seed`.
        pub fn new(device: &::rumus::Device, seed: u64) -> ::rumus::Result<Self> {
            #depth
            #(#builds)*
            ::core::result::Result::Ok(#name { #(#inits,)* })
        }
    }
}

/// The `depth` of every attention layer's residual-projection init (GPT-2's
/// `std / sqrt(2 · layers)`): the attention layers of this model, Repeat copies included.
fn depth(attention_layers: usize) -> Option<TokenStream> {
    (attention_layers > 0).then(|| {
        let (var, n) = (depth_var(), lit(attention_layers));
        quote!(let #var: usize = #n;)
    })
}

/// Builds one field into its local.
fn build(f: &Field, p: &FieldPlan, tied: &[LayerRef]) -> TokenStream {
    let key = f.name.to_string();
    match &p.body {
        FieldBody::Layers(layers) => build_list(&key, layers, tied),
        FieldBody::Nested { path, seed: k, .. } => {
            let (local, seed) = (field_var(&key), seed(*k));
            quote!(let #local = <#path>::new(device, #seed)?;)
        }
    }
}

/// Builds a `layers![..]` field into its local: each layer pushed in order (a batch norm or a
/// `Residual` and the `Relu` after it with one `push_with_relu`, run as one fused op:
/// [`fuse::steps`]), and
/// the weight of every Embedding that a later `Linear(.., tie = ..)` shares bound to its tie
/// variable.
fn build_list(key: &str, layers: &[Layer], tied: &[LayerRef]) -> TokenStream {
    let local = field_var(key);
    let pushes = fuse::steps(layers).into_iter().map(|fuse::Step { index, layer, with_relu }| {
        let ctor = ctor(layer);
        let source = LayerRef { field: key.to_string(), index };
        if with_relu {
            quote!(#local.push_with_relu(::std::boxed::Box::new(#ctor));)
        } else if tied.contains(&source) {
            let var = tie_var(&source);
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
