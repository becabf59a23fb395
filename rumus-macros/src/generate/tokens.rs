//! Small pieces of generated code: literals, shape types, and the names of the locals of `new`.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use crate::analyse::plan::{LayerRef, Pair};

/// An unsuffixed literal, as a size is written.
pub fn lit(n: usize) -> Literal {
    Literal::usize_unsuffixed(n)
}

/// `(h, w)`.
pub fn pair((a, b): Pair) -> TokenStream {
    let (a, b) = (lit(a), lit(b));
    quote!((#a, #b))
}

/// `[1, 28, 28]`.
pub fn dims(s: &[usize]) -> TokenStream {
    let d = s.iter().map(|x| lit(*x));
    quote!([#(#d),*])
}

/// `Shape3<1, 28, 28>`; the plan has checked the rank is 1 to 4.
pub fn shape_type(s: &[usize]) -> TokenStream {
    let d: Vec<Literal> = s.iter().map(|x| lit(*x)).collect();
    match d.as_slice() {
        [a] => quote!(::rumus::Shape1<#a>),
        [a, b] => quote!(::rumus::Shape2<#a, #b>),
        [a, b, c] => quote!(::rumus::Shape3<#a, #b, #c>),
        [a, b, c, e] => quote!(::rumus::Shape4<#a, #b, #c, #e>),
        _ => quote!(::core::compile_error!("rumus: typed tensors have rank 1 to 4")),
    }
}

/// The seed of the `k`-th layer that draws random numbers, derived from `new`'s `seed`.
pub fn seed(k: u64) -> TokenStream {
    quote!(::rumus::__private::derive_seed(seed, #k))
}

/// The local of `new` that holds field `key` while the fields are built.
pub fn field_var(key: &str) -> Ident {
    // A raw field name (`r#type`) loses its `r#` inside the longer name.
    format_ident!("__rumus_field_{}", key.trim_start_matches("r#"))
}

/// The local of `new` that holds the weight of the tie source `field.index`.
pub fn tie_var(source: &LayerRef) -> Ident {
    format_ident!("__rumus_tie_{}_{}", source.field.trim_start_matches("r#"), source.index)
}

/// The local of `new` that holds the number of attention layers.
pub fn depth_var() -> Ident {
    format_ident!("__rumus_attention_layers")
}
