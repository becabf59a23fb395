//! Constructors, host transfers and device moves.

use super::RawTensor;
use crate::backend::cpu::try_filled;
use crate::backend::{DType, RandomKind};
use crate::layout::{checked_numel, MAX_ELEMENTS};
use crate::{Device, Error, Layout, Result};

impl RawTensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// ```
    /// use rumus::{Device, RawTensor};
    ///
    /// let t = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::cpu())?;
    /// assert_eq!(t.shape(), [2, 3]);
    /// assert_eq!(t.to_vec()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn from_vec(data: Vec<f32>, shape: &[usize], device: &Device) -> Result<Self> {
        Self::from_slice(&data, shape, device)
    }

    /// As [`RawTensor::from_vec`], copying from a slice. A value count that does not fill `shape`
    /// is [`Error::Shape`](crate::Error::Shape).
    ///
    /// ```
    /// use rumus::{Device, Error, RawTensor};
    ///
    /// let too_few = RawTensor::from_slice(&[1.0, 2.0, 3.0], &[2, 2], &Device::cpu());
    /// assert!(matches!(too_few, Err(Error::Shape { op: "from_vec", .. })));
    /// ```
    pub fn from_slice(data: &[f32], shape: &[usize], device: &Device) -> Result<Self> {
        let numel = checked_numel("from_vec", shape)?;
        if data.len() != numel {
            return Err(Error::shape(
                "from_vec",
                format!("{} values cannot fill shape {shape:?} ({numel} elements)", data.len()),
            ));
        }
        let storage = device.backend().from_f32(data)?;
        Ok(Self::from_storage(storage, Layout::contiguous(shape), device.clone()))
    }

    /// An integer tensor (class targets, embedding indices). Values are stored as u32.
    pub fn from_indices(data: &[u32], shape: &[usize], device: &Device) -> Result<Self> {
        let numel = checked_numel("from_indices", shape)?;
        if data.len() != numel {
            return Err(Error::shape(
                "from_indices",
                format!("{} values cannot fill shape {shape:?} ({numel} elements)", data.len()),
            ));
        }
        let storage = device.backend().from_u32(data)?;
        Ok(Self::from_storage(storage, Layout::contiguous(shape), device.clone()))
    }

    /// Integer tensor from signed values; a negative value is an error.
    pub fn from_i64(data: &[i64], shape: &[usize], device: &Device) -> Result<Self> {
        let converted = data
            .iter()
            .enumerate()
            .map(|(position, &v)| {
                u32::try_from(v).map_err(|_| Error::IndexOutOfRange {
                    op: "from_i64",
                    index: v,
                    limit: u32::MAX as usize,
                    position,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Self::from_indices(&converted, shape, device)
    }

    /// A tensor of `shape` with every element `value`.
    ///
    /// ```
    /// use rumus::{Device, RawTensor};
    ///
    /// let t = RawTensor::full(0.5, &[2, 2], &Device::cpu())?;
    /// assert_eq!(t.to_vec()?, [0.5; 4]);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn full(value: f32, shape: &[usize], device: &Device) -> Result<Self> {
        let storage = device.backend().full(checked_numel("full", shape)?, value)?;
        Ok(Self::from_storage(storage, Layout::contiguous(shape), device.clone()))
    }

    /// A tensor of `shape` filled with 0.0.
    pub fn zeros(shape: &[usize], device: &Device) -> Result<Self> {
        Self::full(0.0, shape, device)
    }

    /// A tensor of `shape` filled with 1.0.
    pub fn ones(shape: &[usize], device: &Device) -> Result<Self> {
        Self::full(1.0, shape, device)
    }

    /// Zeros of this tensor's shape, on its device (not recorded by autograd).
    pub fn zeros_like(&self) -> Result<Self> {
        Self::zeros(self.shape(), self.device())
    }

    /// Ones of this tensor's shape, on its device (not recorded by autograd).
    pub fn ones_like(&self) -> Result<Self> {
        Self::ones(self.shape(), self.device())
    }

    /// `start, start+step, ...` below `end`, as a 1-D tensor.
    pub fn arange(start: f32, end: f32, step: f32, device: &Device) -> Result<Self> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(Error::invalid("arange", format!("start {start}, end {end}, step {step}")));
        }
        // In f64 so that `end - start` cannot overflow.
        let count = ((end as f64 - start as f64) / step as f64).ceil().max(0.0);
        if count.is_nan() || count > MAX_ELEMENTS as f64 {
            return Err(Error::shape(
                "arange",
                format!("start {start}, end {end}, step {step}: {count} elements exceed the limit of 2^40"),
            ));
        }
        let mut data = try_filled("arange", count as usize, 0.0f32)?;
        data.iter_mut().enumerate().for_each(|(i, v)| *v = start + i as f32 * step);
        Self::from_slice(&data, &[data.len()], device)
    }

    /// Uniform in `[low, high)`, seeded; identical on every device.
    pub fn rand_uniform(shape: &[usize], low: f32, high: f32, seed: u64, device: &Device) -> Result<Self> {
        let storage = device.backend().random(RandomKind::Uniform, checked_numel("rand_uniform", shape)?, seed)?;
        let unit = Self::from_storage(storage, Layout::contiguous(shape), device.clone());
        unit.affine(high - low, low)
    }

    /// Normal with `mean` and `std`, seeded; identical on every device.
    pub fn randn(shape: &[usize], mean: f32, std: f32, seed: u64, device: &Device) -> Result<Self> {
        let storage = device.backend().random(RandomKind::Normal, checked_numel("randn", shape)?, seed)?;
        let unit = Self::from_storage(storage, Layout::contiguous(shape), device.clone());
        unit.affine(std, mean)
    }

    /// All elements in row-major order. On a GPU this is a (counted) device → host transfer.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.check_f32("to_vec")?;
        self.device().backend().to_f32(self.storage(), self.layout())
    }

    /// All elements of an integer tensor.
    pub fn to_vec_u32(&self) -> Result<Vec<u32>> {
        match self.dtype() {
            DType::U32 => self.device().backend().to_u32(self.storage(), self.layout()),
            other => Err(Error::DType { op: "to_vec_u32", expected: "u32", got: other.name() }),
        }
    }

    /// The value of a one-element tensor.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return Err(Error::shape("item", format!("needs exactly one element, shape is {:?}", self.shape())));
        }
        Ok(self.to_vec()?[0])
    }

    /// A copy on `device` (a leaf: the copy does not carry the graph).
    pub fn to_device(&self, device: &Device) -> Result<Self> {
        if self.device().same(device) {
            return Ok(self.clone());
        }
        let shape = self.shape().to_vec();
        match self.dtype() {
            DType::F32 => Self::from_vec(self.to_vec()?, &shape, device),
            DType::U32 => Self::from_indices(&self.to_vec_u32()?, &shape, device),
        }
    }

    /// A row-major copy starting at element 0 (or `self` if it already is one).
    pub fn contiguous(&self) -> Result<Self> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let out = self.copied_storage("contiguous")?;
        let out_layout = Layout::contiguous(self.shape());
        Ok(Self::from_op(out, out_layout, self.device().clone(), &[self], || Box::new(crate::ops::view::Identity)))
    }

    /// The elements of `self`, row-major, in a fresh storage of their own on `self`'s device.
    pub(crate) fn copied_storage(&self, op: &'static str) -> Result<crate::backend::Storage> {
        let backend = self.device().backend();
        let out = match self.dtype() {
            DType::F32 => return backend.gather_f32(self.storage(), self.layout()),
            DType::U32 => backend.from_u32(&try_filled(op, self.numel(), 0u32)?)?,
        };
        backend.copy_strided(self.storage(), self.layout(), &out, &Layout::contiguous(self.shape()))?;
        Ok(out)
    }
}
