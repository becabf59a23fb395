//! The typed face of a model. `#[model]` implements [`Model`] for the struct it annotates;
//! training, evaluation and checkpoints are provided on top of it as default methods.

use std::path::Path;

use crate::data::{Dataset, SampleFor, TargetFor};
use crate::nn::Module;
use crate::train::{Evaluation, Fit, History, ValidationFor};
use crate::{Result, Shape, Tensor};

/// A module whose per-sample input and output shapes are known at compile time.
///
/// `#[model]` declares one; its shapes are checked when it compiles, and `predict` takes and
/// returns typed batches:
///
/// ```
/// use rumus::prelude::*;
///
/// #[model(input = [4])]
/// pub struct Mlp {
///     body: layers![Linear(8), Relu, Linear(3)],
/// }
///
/// let device = Device::cpu();
/// let model = Mlp::new(&device, 42)?; // seeded initialisation
/// assert_eq!(Mlp::TRAINABLE_PARAMS, 4 * 8 + 8 + 8 * 3 + 3);
/// let x = Tensor::<Shape1<4>>::from_vec(vec![0.5; 8], &device)?; // a batch of 2 samples
/// let logits: Tensor<Shape1<3>> = model.predict(&x)?;
/// assert_eq!(logits.raw().shape(), [2, 3]);
/// # Ok::<(), rumus::Error>(())
/// ```
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
    ///
    /// ```
    /// use rumus::prelude::*;
    ///
    /// #[model(input = [2])]
    /// pub struct Classifier {
    ///     body: layers![Linear(16), Relu, Linear(2)],
    /// }
    ///
    /// // Points left of the y axis are class 0, right of it class 1.
    /// let points = vec![-1.0, 0.5, -0.8, -0.3, -0.6, 0.9, -0.9, -0.7, 0.7, 0.2, 0.9, -0.5, 0.6, 0.8, 0.8, -0.9];
    /// let data = ClassDataset::<Shape1<2>, 2>::new(points, vec![0, 0, 0, 0, 1, 1, 1, 1])?;
    /// let mut model = Classifier::new(&Device::cpu(), 0)?;
    /// let settings = Fit::epochs(30).batch_size(4).optimizer(Adam::new(0.05)).verbose(Verbosity::Quiet);
    /// let history = model.fit(&data, settings)?;
    /// let loss = history.get("loss").expect("fit records the training loss");
    /// assert_eq!(loss.len(), 30);
    /// assert!(loss[29] < loss[0]);
    /// assert_eq!(model.evaluate(&data)?.accuracy, 1.0);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    fn fit<D, V>(&mut self, train: &D, cfg: Fit<'_, V>) -> Result<History>
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
    ///
    /// ```
    /// use rumus::prelude::*;
    ///
    /// #[model(input = [4])]
    /// pub struct Small {
    ///     body: layers![Linear(3)],
    /// }
    /// #[model(input = [4])]
    /// pub struct Wider {
    ///     body: layers![Linear(5)],
    /// }
    ///
    /// let device = Device::cpu();
    /// let path = std::env::temp_dir().join(format!("rumus-doc-{}.safetensors", std::process::id()));
    /// let trained = Small::new(&device, 1)?;
    /// trained.save(&path)?;
    /// let mut restored = Small::new(&device, 2)?; // other weights until the load
    /// restored.load(&path)?;
    /// let x = Tensor::<Shape1<4>>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &device)?;
    /// assert_eq!(restored.predict(&x)?.raw().to_vec()?, trained.predict(&x)?.raw().to_vec()?);
    /// // Another model's file is refused, naming every mismatch, and leaves the model unchanged.
    /// assert!(matches!(Wider::new(&device, 0)?.load(&path), Err(Error::Checkpoint { .. })));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), rumus::Error>(())
    /// ```
    fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::save_module(self, path)
    }

    /// Loads a checkpoint strictly: missing, unexpected or mis-shaped tensors are an error
    /// that names them, and leave the model unchanged.
    fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::load_module(self, path)
    }
}
