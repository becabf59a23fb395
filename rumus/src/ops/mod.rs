//! Differentiable operations on [`RawTensor`](crate::RawTensor), one family per file. Each file
//! holds the forward (which validates and calls the device's kernel) and its backward rule.
//! Beside them, the operations outside autograd that the layers above need (in-place assignment,
//! the fused optimizer update, loss scaling's unscale-and-check, rows picked by host indices):
//! this module is the only caller of [`Backend`](crate::backend::Backend) above the tensor
//! itself (see docs/ARCHITECTURE.md).

mod assign;
mod attention;
mod binary;
mod concat;
mod conv;
mod conv1d;
mod conv_transpose;
mod dropout;
pub(crate) mod grad_unscale;
mod index;
mod loss;
mod matmul;
mod norm;
mod optimizer_step;
mod pointwise_loss;
mod pool;
mod recurrent;
mod reduce;
mod select_rows;
mod softmax;
pub(crate) mod sum_squares;
mod unary;
mod upsample;
pub(crate) mod view;
mod warp;

pub use conv1d::Conv1dPadding;
pub use conv_transpose::{conv_transpose_extent, ConvTranspose2dArgs};
pub(crate) use grad_unscale::{unscale_grad, NonFiniteFlags};
pub use loss::{CrossEntropyOptions, Reduction};
pub use norm::RunningStats;
pub(crate) use optimizer_step::{optimizer_steps, ParamUpdate};
pub use recurrent::{RecurrentOutput, RecurrentWeights};
pub use upsample::UpsampleMode;
pub use warp::Interpolation;

/// Plain kernel vocabulary that the layers above `ops` name (op codes, element types, optimizer
/// hyper-parameters): re-exported here so that `nn`, `optim`, `data`, `io` and `train` never
/// name the backend (see `tests/house/architecture.rs`).
pub(crate) use crate::backend::{BinaryOp, DType, OptimizerStep};
