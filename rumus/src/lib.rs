//! # rumus
//!
//! A deep-learning framework with typed tensors, reverse-mode autograd, a multi-threaded CPU
//! backend and a wgpu backend. Models are declared with `#[model]` and `layers!` (see
//! `rumus-macros`), which check every shape at compile time.
//!
//! Tensors, an op and its gradient:
//!
//! ```
//! use rumus::{Device, RawTensor};
//!
//! let device = Device::cpu(); // or Device::best(): a GPU through wgpu when there is one
//! let w = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], &device)?.requires_grad_()?;
//! let x = RawTensor::from_vec(vec![1.0, 2.0], &[2, 1], &device)?;
//! let loss = w.matmul(&x)?.sum(&[0, 1], false)?; // (1·1 + 2·2) + (3·1 + 4·2)
//! assert_eq!(loss.item()?, 16.0);
//! let grads = loss.backward()?;
//! assert_eq!(grads.get(&w).expect("w took part").to_vec()?, [1.0, 2.0, 1.0, 2.0]);
//! # Ok::<(), rumus::Error>(())
//! ```
//!
//! Models, training, checkpoints and generation: see [`Model`] and [`generate::Generation`].

#![warn(missing_docs)]

pub mod autograd;
pub mod backend;
pub mod data;
mod device;
pub mod distributed;
mod error;
pub mod generate;
pub mod io;
pub mod layout;
pub mod loss;
mod model;
pub mod nn;
mod ops;
pub mod optim;
mod precision;
pub mod rng;
mod tensor;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod thread_depth;
pub mod train;
#[cfg(feature = "wgpu")]
mod warmup;

pub use autograd::{no_grad, Gradients};
pub use device::Device;
pub use error::{Error, Result};
pub use layout::Layout;
pub use model::Model;
pub use ops::{
    conv_transpose_extent, Conv1dPadding, ConvTranspose2dArgs, Interpolation, RecurrentOutput, RecurrentWeights,
    RunningStats, UpsampleMode,
};
pub use precision::MatmulPrecision;
pub use tensor::{RawTensor, Shape, Shape1, Shape2, Shape3, Shape4, Tensor, TensorId};

/// The names most programs need.
pub mod prelude {
    pub use crate::data::{Class, ClassDataset, Dataset, Regression, SeqClass, TensorDataset};
    pub use crate::generate::{Generate, Generation};
    pub use crate::nn::Module;
    pub use crate::optim::{Adam, AdamW, LossScaler, Optimizer, RmsProp, Sgd};
    pub use crate::train::{
        CsvLogger, EarlyStopping, Fit, History, Loss, Metric, ModelCheckpoint, ReduceLROnPlateau, TerminateOnNaN,
        Verbosity,
    };
    pub use crate::{layers, model};
    pub use crate::{no_grad, Device, Error, Model, RawTensor, Result, Shape, Shape1, Shape2, Shape3, Shape4, Tensor};
}

// `#[model]` / `layers!`, and the items the code they generate refers to (`::rumus::__private`).
#[doc(hidden)]
pub use rumus_macros::__model_resume;
pub use rumus_macros::{layers, model};
#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;
