//! Layers. Each layer is a [`Module`]: an untyped forward plus named parameters in PyTorch's
//! names and layouts, so checkpoints interchange with PyTorch.
//!
//! The `#[model]` macro instantiates these with the shapes it inferred at compile time.

mod activation;
mod attention;
mod batch_norm;
mod causal_self_attention;
mod conv;
mod conv1d;
mod conv_transpose;
mod dropout;
mod embedding;
mod eval_mode;
mod global_pool;
mod group_norm;
mod gru;
mod heads;
pub mod init;
mod instance_norm;
mod kv_cache;
mod layer_norm;
mod linear;
mod lstm;
mod module;
mod param;
mod pool;
mod positional_embedding;
mod recurrent;
mod reshape;
mod residual;
mod rms_norm;
mod sequential;
mod transformer_block;
mod upsample;

pub use activation::{Gelu, GeluTanh, LeakyRelu, LogSoftmax, Relu, Sigmoid, Silu, Softmax, Tanh};
pub use attention::MultiHeadAttention;
pub use batch_norm::{BatchNorm1d, BatchNorm2d};
pub use causal_self_attention::CausalSelfAttention;
pub use conv::{Conv2d, Conv2dConfig};
pub use conv1d::{Conv1d, Conv1dConfig};
pub use conv_transpose::{ConvTranspose2d, ConvTranspose2dConfig};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use eval_mode::{training_active, EvalGuard};
pub use global_pool::{GlobalAvgPool, GlobalMaxPool};
pub use group_norm::GroupNorm;
pub use gru::Gru;
pub use instance_norm::InstanceNorm2d;
pub use kv_cache::KvCache;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use lstm::Lstm;
pub use module::{count_trainable, join_name, named_buffers, named_parameters, named_params, Module};
pub(crate) use param::unique_trainable;
pub use param::Param;
pub use pool::{AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d};
pub use positional_embedding::PositionalEmbedding;
pub use recurrent::RecurrentConfig;
pub use reshape::{Flatten, Reshape};
pub use residual::Residual;
pub use rms_norm::{RmsNorm, RMS_NORM_EPS};
pub use sequential::Sequential;
pub use transformer_block::TransformerBlock;
pub use upsample::Upsample;
