//! The typed face of a model. `#[model]` implements [`Model`] for the struct it annotates;
//! training, evaluation and checkpoints are provided on top of it as default methods.

use std::path::Path;

use crate::data::{Dataset, SampleFor, TargetFor};
use crate::nn::Module;
use crate::train::{Evaluation, Fit, History, ValidationFor};
use crate::{Result, Shape, Tensor};

/// A module whose per-sample input and output shapes are known at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rumus model",
    label = "annotate the struct with #[model(input = [...])]"
)]
pub trait Model: Module + Sized {
    /// Per-sample input shape, e.g. `Shape3<1, 28, 28>`.
    type Input: Shape;
    /// Per-sample output shape, e.g. `Shape1<10>`.
    type Output: Shape;

    /// Trains on `train` (see [`crate::train::fit`]). Samples and targets must fit the model:
    /// checked at compile time.
    fn fit<D, V>(&mut self, train: &D, cfg: Fit<V>) -> Result<History>
    where
        D: Dataset,
        D::Sample: SampleFor<Self::Input>,
        D::Target: TargetFor<Self::Output>,
        V: ValidationFor<Self>,
    {
        crate::train::fit(self, train, cfg)
    }

    /// Mean loss and accuracy on `data`, in eval mode, without a graph. Needs no `&mut`: the
    /// layers act as in eval mode for this call only, and the model's mode is unchanged.
    fn evaluate<D>(&self, data: &D) -> Result<Evaluation>
    where
        D: Dataset,
        D::Sample: SampleFor<Self::Input>,
        D::Target: TargetFor<Self::Output>,
    {
        crate::train::evaluate(self, data)
    }

    /// Outputs for a batch, in eval mode (for this call only), without a graph.
    fn predict(&self, inputs: &Tensor<Self::Input>) -> Result<Tensor<Self::Output>> {
        crate::train::predict(self, inputs)
    }

    /// Saves parameters and buffers as safetensors with PyTorch's names (atomically).
    fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::save_module(self, path)
    }

    /// Loads a checkpoint strictly: missing, unexpected or mis-shaped tensors are an error
    /// that names them, and leave the model unchanged.
    fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::load_module(self, path)
    }
}
