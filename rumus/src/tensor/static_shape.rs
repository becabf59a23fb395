//! Per-sample shapes as types. `Shape3<1, 28, 28>` is one MNIST image; the batch axis is not
//! part of the type. The `#[model]` macro computes these shapes and writes them into the
//! signatures it generates, so no const-generic arithmetic is needed.

/// A static per-sample shape.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tensor shape",
    label = "expected a shape such as Shape1<10> or Shape3<1, 28, 28>"
)]
pub trait Shape: 'static + Send + Sync {
    /// The per-sample dimensions.
    const DIMS: &'static [usize];

    /// Number of elements in one sample.
    fn sample_numel() -> usize {
        crate::layout::numel(Self::DIMS)
    }

    /// The full shape of a batch of `batch` samples.
    fn with_batch(batch: usize) -> Vec<usize> {
        let mut shape = Vec::with_capacity(Self::DIMS.len() + 1);
        shape.push(batch);
        shape.extend_from_slice(Self::DIMS);
        shape
    }
}

/// A vector of `A` features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape1<const A: usize>;
/// A `[A, B]` sample (e.g. a sequence of `A` tokens with `B` features).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape2<const A: usize, const B: usize>;
/// A `[C, H, W]` image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape3<const A: usize, const B: usize, const C: usize>;
/// A rank-4 sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape4<const A: usize, const B: usize, const C: usize, const D: usize>;

impl<const A: usize> Shape for Shape1<A> {
    const DIMS: &'static [usize] = &[A];
}
impl<const A: usize, const B: usize> Shape for Shape2<A, B> {
    const DIMS: &'static [usize] = &[A, B];
}
impl<const A: usize, const B: usize, const C: usize> Shape for Shape3<A, B, C> {
    const DIMS: &'static [usize] = &[A, B, C];
}
impl<const A: usize, const B: usize, const C: usize, const D: usize> Shape for Shape4<A, B, C, D> {
    const DIMS: &'static [usize] = &[A, B, C, D];
}
