//! Layers. Each layer is a [`Module`]: an untyped forward plus named parameters in PyTorch's
//! names and layouts, so checkpoints interchange with PyTorch.
//!
//! The `#[model]` macro instantiates these with the shapes it inferred at compile time.

mod activation;
pub mod init;
mod linear;
mod module;
mod param;
mod sequential;

pub use activation::{Gelu, GeluTanh, LeakyRelu, LogSoftmax, Relu, Sigmoid, Silu, Softmax, Tanh};
pub use linear::Linear;
pub use module::{count_trainable, join_name, named_params, Module};
pub use param::Param;
pub use sequential::Sequential;
