//! The typed tensor: a batch of samples whose per-sample shape is part of the type.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use super::{RawTensor, Shape};
use crate::{Device, Error, Result};

/// A batch of samples of static shape `S`; the batch size is dynamic. Derefs to [`RawTensor`]
/// for untyped ops; typed ops keep `S`.
pub struct Tensor<S: Shape> {
    raw: RawTensor,
    shape: PhantomData<S>,
}

impl<S: Shape> Clone for Tensor<S> {
    fn clone(&self) -> Self {
        Tensor { raw: self.raw.clone(), shape: PhantomData }
    }
}

impl<S: Shape> Tensor<S> {
    /// Checks that `raw` is `[batch, S...]` and types it; a mismatch is an error, not a panic.
    pub fn from_raw(raw: RawTensor) -> Result<Self> {
        if raw.rank() != S::DIMS.len() + 1 || &raw.shape()[1..] != S::DIMS {
            return Err(Error::shape(
                "Tensor::from_raw",
                format!(
                    "expected a batch of per-sample shape {:?} (i.e. [batch, {}]), got {:?}",
                    S::DIMS,
                    S::DIMS.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
                    raw.shape()
                ),
            ));
        }
        Ok(Tensor { raw, shape: PhantomData })
    }

    /// Types `raw` without checking. For generated code whose shapes the macro has proven.
    #[doc(hidden)]
    pub fn from_raw_unchecked(raw: RawTensor) -> Self {
        debug_assert_eq!(&raw.shape()[1..], S::DIMS);
        Tensor { raw, shape: PhantomData }
    }

    /// A batch from row-major data; `data.len()` must be a multiple of the sample size.
    ///
    /// ```
    /// use rumus::{Device, Shape1, Tensor};
    ///
    /// let batch = Tensor::<Shape1<3>>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &Device::cpu())?;
    /// assert_eq!(batch.batch_size(), 2);
    /// assert_eq!(batch.raw().shape(), [2, 3]);
    /// // Six values are not a whole number of 4-element samples.
    /// assert!(Tensor::<Shape1<4>>::from_vec(vec![1.0; 6], &Device::cpu()).is_err());
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn from_vec(data: Vec<f32>, device: &Device) -> Result<Self> {
        let per = S::sample_numel();
        if per == 0 || !data.len().is_multiple_of(per) {
            return Err(Error::shape(
                "Tensor::from_vec",
                format!("{} values are not a whole number of samples of shape {:?}", data.len(), S::DIMS),
            ));
        }
        let batch = data.len() / per;
        Self::from_raw(RawTensor::from_vec(data, &S::with_batch(batch), device)?)
    }

    /// `batch` samples of zeros.
    pub fn zeros(batch: usize, device: &Device) -> Result<Self> {
        Self::from_raw(RawTensor::zeros(&S::with_batch(batch), device)?)
    }

    /// Seeded standard-normal samples.
    pub fn randn(batch: usize, seed: u64, device: &Device) -> Result<Self> {
        Self::from_raw(RawTensor::randn(&S::with_batch(batch), 0.0, 1.0, seed, device)?)
    }

    /// Number of samples (the size of the leading axis).
    pub fn batch_size(&self) -> usize {
        self.raw.shape()[0]
    }

    /// The per-sample shape.
    pub fn sample_shape() -> &'static [usize] {
        S::DIMS
    }

    /// The untyped tensor `[batch, ...S::DIMS]`, for ops that change the per-sample shape.
    pub fn raw(&self) -> &RawTensor {
        &self.raw
    }

    /// Gives up the type, returning the untyped tensor.
    pub fn into_raw(self) -> RawTensor {
        self.raw
    }

    /// Applies a shape-preserving untyped op and keeps the type.
    pub fn map(&self, f: impl FnOnce(&RawTensor) -> Result<RawTensor>) -> Result<Self> {
        Self::from_raw(f(&self.raw)?)
    }

    /// Elementwise sum with a tensor of the same shape (residual connections).
    pub fn add(&self, other: &Tensor<S>) -> Result<Self> {
        Ok(Self::from_raw_unchecked(self.raw.add(&other.raw)?))
    }

    /// `max(self + other, 0)` in one pass, with a tensor of the same shape (a residual
    /// connection and the ReLU after it): [`RawTensor::add_relu`].
    pub fn add_relu(&self, other: &Tensor<S>) -> Result<Self> {
        Ok(Self::from_raw_unchecked(self.raw.add_relu(&other.raw)?))
    }

    /// A copy on `device` (the same tensor when it is already there).
    pub fn to_device(&self, device: &Device) -> Result<Self> {
        Ok(Self::from_raw_unchecked(self.raw.to_device(device)?))
    }

    /// The same values outside the autograd graph: no gradient flows back through the result.
    pub fn detach(&self) -> Self {
        Self::from_raw_unchecked(self.raw.detach())
    }
}

impl<S: Shape> TryFrom<RawTensor> for Tensor<S> {
    type Error = Error;

    fn try_from(raw: RawTensor) -> Result<Self> {
        Self::from_raw(raw)
    }
}

impl<S: Shape> Deref for Tensor<S> {
    type Target = RawTensor;

    fn deref(&self) -> &RawTensor {
        &self.raw
    }
}

impl<S: Shape> fmt::Debug for Tensor<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{:?}>(batch {}, {})", S::DIMS, self.batch_size(), self.raw.device().name())
    }
}
