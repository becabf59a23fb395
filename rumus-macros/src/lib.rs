//! Proc macros for rumus: `#[model]` and `layers!`, with shape inference at expansion time.
//!
//! ```ignore
//! #[model(input = [1, 28, 28])]
//! pub struct LeNet {
//!     features: layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2),
//!                       Conv2d(16, kernel = 5), Relu, MaxPool2d(2)],
//!     head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)],
//! }
//! ```
//!
//! Pipeline, parse → analyse → generate:
//! - `parse`: tokens → layer calls and the model's fields, keeping the tokens for spans;
//! - `spec`: the table of layers (arguments, the shape rule of each, docs), and argument binding;
//! - `analyse`: the shape rules walked from the input to a typed plan (`LayerKind` per layer,
//!   shapes, parameter counts), or errors spanned on what the user wrote; `summary` renders it;
//! - `generate`: the only code that emits tokens, one small generator per concern.
//!
//! Everything runs on `proc_macro2` so it can be unit-tested and fuzzed outside a compiler.

mod analyse;
mod generate;
mod parse;
mod spec;
mod suggest;
mod summary;

#[cfg(test)]
mod fuzz;

use proc_macro::TokenStream;

/// Declares a model: a struct whose fields are `layers![..]` lists or other `#[model]` structs.
///
/// Arguments: `input = [..]` (per-sample input shape, required), `output = [..]` (checked, or
/// required with `forward = custom`), `forward = custom` (write your own typed `forward`).
///
/// Every shape is computed while expanding; a mismatch is a compile error on the offending layer.
/// Generated: `new(&Device, seed)`, a typed `forward` (and `forward_<field>` per field),
/// `impl Module` (PyTorch parameter names; `forward_cached` for incremental decoding), `impl Model`, `train`/`eval`, `parameters`,
/// `named_parameters`, `INPUT`/`OUTPUT`/`TRAINABLE_PARAMS`/`TOTAL_PARAMS`, and `summary()`.
///
/// ```ignore
/// use rumus::prelude::*;
///
/// #[model(input = [784])]
/// pub struct Mlp {
///     body: layers![Linear(300), Relu, Linear(100), Relu, Linear(10)],
/// }
///
/// let mlp = Mlp::new(&Device::cpu(), 0)?;
/// let y: Tensor<Shape1<10>> = mlp.forward(&Tensor::<Shape1<784>>::zeros(32, &Device::cpu())?)?;
/// ```
///
/// See `docs/DSL.md` for every layer, its arguments and its shape rule.
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    generate::model(attr.into(), item.into()).into()
}

/// An ordered list of layers; only meaningful as the type of a `#[model]` struct field.
#[proc_macro]
pub fn layers(input: TokenStream) -> TokenStream {
    generate::layers_alone(input.into()).into()
}

/// Internal: re-enters `#[model]` with a nested model's shapes (called by the callback macro
/// every model defines).
#[doc(hidden)]
#[proc_macro]
pub fn __model_resume(input: TokenStream) -> TokenStream {
    generate::resume(input.into()).into()
}
