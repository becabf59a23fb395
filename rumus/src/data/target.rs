//! Target kinds: class indices or regression values, with their shape in the type.

use std::fmt;
use std::marker::PhantomData;

use crate::{Shape, Shape1, Shape2};

/// What a dataset's targets are, at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// `u32` class indices below `classes`.
    Class {
        /// Number of classes (the model's output width).
        classes: usize,
    },
    /// `f32` values of per-sample shape `dims`.
    Regression {
        /// The per-sample target shape (the model's output shape).
        dims: &'static [usize],
    },
}

/// A kind of target. Implemented by [`Class`] and [`Regression`].
pub trait Target: 'static + Send + Sync {
    /// What the targets are, checked against the model's output when `fit` is called.
    const KIND: TargetKind;
}

/// Class indices `0..N` (one `u32` per sample); pairs with a model output `Shape1<N>` of logits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Class<const N: usize>;

/// One class index `0..V` per position of a length-`T` sequence (`T` `u32`s per sample): the
/// next-token targets of a language model. Pairs with a model output `Shape2<T, V>` of logits,
/// one row per position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqClass<const T: usize, const V: usize>;

/// Real-valued targets of per-sample shape `S`; pairs with a model output `S`.
pub struct Regression<S: Shape>(PhantomData<S>);

impl<S: Shape> fmt::Debug for Regression<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Regression<{:?}>", S::DIMS)
    }
}

impl<const N: usize> Target for Class<N> {
    const KIND: TargetKind = TargetKind::Class { classes: N };
}

impl<const T: usize, const V: usize> Target for SeqClass<T, V> {
    const KIND: TargetKind = TargetKind::Class { classes: V };
}

impl<S: Shape> Target for Regression<S> {
    const KIND: TargetKind = TargetKind::Regression { dims: S::DIMS };
}

/// Proof that targets `Self` can supervise a model whose per-sample output is `O`.
#[diagnostic::on_unimplemented(
    message = "a model with output `{O}` cannot be trained on targets `{Self}`",
    label = "the dataset's targets do not fit the model's output",
    note = "`Class<N>` targets need a model output `Shape1<N>`; `SeqClass<T, V>` targets need `Shape2<T, V>`; `Regression<S>` targets need output `S`"
)]
pub trait TargetFor<O: Shape>: Target {}

impl<const N: usize> TargetFor<Shape1<N>> for Class<N> {}

impl<const T: usize, const V: usize> TargetFor<Shape2<T, V>> for SeqClass<T, V> {}

impl<S: Shape> TargetFor<S> for Regression<S> {}
