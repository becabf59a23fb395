//! The `Dataset` trait.

use super::Target;
use crate::{Device, RawTensor, Result, Shape, Tensor};

/// A finite, indexable collection of (sample, target) pairs that assembles whole batches.
///
/// `get_batch` returns the inputs `[batch, Sample...]` and the targets: `u32` class indices
/// `[batch]` for [`Class`](super::Class) targets, `f32` values `[batch, S...]` for
/// [`Regression`](super::Regression) targets. Datasets are shared with the loader's prefetch
/// thread, hence `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// Per-sample input shape.
    type Sample: Shape;
    /// What the targets are.
    type Target: Target;

    /// Number of samples.
    fn len(&self) -> usize;

    /// True when the dataset has no sample (`fit` and loaders refuse such a dataset).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices`, in that order, on `device`. An index `>= len()` is an
    /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<Self::Sample>, RawTensor)>;
}

/// Proof that samples of shape `Self` are what a model with input `I` takes; only `S: SampleFor<S>`
/// holds. It exists for its compile error, which reads in shapes.
#[diagnostic::on_unimplemented(
    message = "a model with input `{I}` cannot be fed samples of shape `{Self}`",
    label = "the dataset's samples do not have the model's input shape",
    note = "reshape the dataset (e.g. `ClassDataset::reshape::<{I}>()`) or change the model's input"
)]
pub trait SampleFor<I: crate::Shape>: crate::Shape {}

impl<S: crate::Shape> SampleFor<S> for S {}
