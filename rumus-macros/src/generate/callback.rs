//! How an enclosing `#[model]` learns a nested model's shapes: every model defines a macro of
//! its own name that re-enters `#[model]` with them ([`callback_macro`]), and a model with a
//! nested field whose shapes are not known yet expands to a call of it ([`callback`]).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

/// `path! { field [attr] [known] item }`: every #[model] defines a macro of its own name (macros
/// and types live in different namespaces), so the path that names the type names the macro too,
/// through `use`, `pub use`, `super::` or another crate.
pub fn callback(
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
