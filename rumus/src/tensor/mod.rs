//! Tensors: [`RawTensor`] (untyped, any rank) and [`Tensor<S>`] (per-sample shape in the type).

mod create;
mod raw;
mod static_shape;
mod typed;

pub use raw::{RawTensor, TensorId};
pub use static_shape::{Shape, Shape1, Shape2, Shape3, Shape4};
pub use typed::Tensor;
