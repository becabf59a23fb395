//! The typed face of a model. `#[model]` implements [`Model`] for the struct it annotates;
//! training, evaluation and checkpoints are provided on top of it.

use crate::nn::Module;
use crate::Shape;

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
}
