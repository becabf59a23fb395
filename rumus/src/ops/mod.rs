//! Differentiable operations on [`RawTensor`](crate::RawTensor), one family per file. Each file
//! holds the forward (which validates and calls the device's kernel) and its backward rule.

mod binary;
mod matmul;
mod reduce;
mod softmax;
mod unary;
pub(crate) mod view;
