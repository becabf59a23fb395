//! Differentiable operations on [`RawTensor`](crate::RawTensor), one family per file. Each file
//! holds the forward (which validates and calls the device's kernel) and its backward rule.

mod binary;
mod concat;
mod conv;
mod dropout;
mod index;
mod loss;
mod matmul;
mod norm;
mod pool;
mod reduce;
mod softmax;
mod unary;
pub(crate) mod view;

pub use norm::RunningStats;
