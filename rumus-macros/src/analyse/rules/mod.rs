//! The shape rules of the built-in layers: one function per layer, named in the layer's row of
//! [`crate::spec::LAYERS`]. A rule gets the [`Site`](super::walk::Site) (the call, its bound
//! arguments, the producer of its input) and the model's [`Ctx`](super::walk::Ctx) (seeds, ties,
//! attention depth), and returns the typed [`Layer`](super::Layer) or a spanned error naming
//! the layer, the shape it needs, the shape it got and a hint.

pub mod attention;
pub mod block;
pub mod conv;
pub mod conv1d;
pub mod dense;
pub mod elementwise;
pub mod embedding;
pub mod norm;
pub mod recurrent;
pub mod reshape;
