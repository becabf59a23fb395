//! Analysis: from the parsed model to a typed [`Plan`], or spanned errors. Every layer's shape
//! rule (in [`rules`], named by its row of [`crate::spec::LAYERS`]) gives a [`Layer`] whose
//! [`LayerKind`] holds the resolved arguments; [`walk`] runs the rules along a layer list;
//! [`model`] plans a struct's fields; [`fuse`] pairs the layers the forward runs as one op.
//! Nothing here emits code: that is [`crate::generate`]'s.

pub mod fuse;
mod model;
pub mod plan;
pub mod rules;
pub mod walk;

pub use model::plan;
pub use plan::{FieldBody, Layer, LayerKind, Plan, Stop};
