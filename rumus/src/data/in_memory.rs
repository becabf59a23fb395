//! Datasets held in memory: [`ClassDataset`] (inputs + class labels) and [`TensorDataset`]
//! (inputs + real-valued targets).
//!
//! The inputs live in one tensor; a batch is cut from it with the device's `index_select`
//! kernel. On a GPU, inputs that fit the device's largest binding are uploaded once (on first
//! use) and every batch is gathered there, so only the batch's indices and targets cross the bus;
//! larger inputs (full MNIST is 188 MB, over the 128 MiB many GPUs bind) are gathered on the host
//! and the batch is uploaded.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use super::{Class, Dataset, Regression};
use crate::{Device, Error, RawTensor, Result, Shape, Tensor};

/// Rows `[n, per]` of samples kept on the host, plus copies on devices already used.
struct Rows {
    host: RawTensor,
    on_devices: Mutex<Vec<RawTensor>>,
}

impl Rows {
    fn new(op: &'static str, data: Vec<f32>, count: usize, per: usize) -> Result<Arc<Self>> {
        if data.len() != count * per {
            return Err(Error::Data(format!(
                "{op}: {} values are not {count} samples of {per} values each ({} expected)",
                data.len(),
                count * per
            )));
        }
        // NaN or infinite inputs would only surface as a NaN loss after training on them.
        if let Some(i) = data.iter().position(|v| !v.is_finite()) {
            return Err(Error::NonFinite(format!(
                "{op}: value {} at sample {} (element {} of it) is not finite",
                data[i],
                i / per.max(1),
                i % per.max(1)
            )));
        }
        let host = RawTensor::from_vec(data, &[count, per], &Device::cpu())?;
        Ok(Arc::new(Rows { host, on_devices: Mutex::new(Vec::new()) }))
    }

    fn count(&self) -> usize {
        self.host.shape()[0]
    }

    /// The rows on `device`, uploading them on first use.
    fn on(&self, device: &Device) -> Result<RawTensor> {
        if device.same(self.host.device()) {
            return Ok(self.host.clone());
        }
        let mut cache = self.on_devices.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = cache.iter().find(|t| t.device().same(device)) {
            return Ok(t.clone());
        }
        let t = self.host.to_device(device)?;
        cache.push(t.clone());
        Ok(t)
    }

    /// Rows at `indices` as `[indices.len(), per]` on `device`.
    fn select(&self, op: &'static str, indices: &[usize], device: &Device) -> Result<RawTensor> {
        let bytes = (self.host.numel() * std::mem::size_of::<f32>()) as u64;
        if device.max_tensor_bytes().is_some_and(|limit| bytes > limit) {
            // Too large to live on the device in one piece: gather on the host, upload the batch.
            return self.select(op, indices, self.host.device())?.to_device(device);
        }
        self.on(device)?.select_rows(op, indices)
    }
}

/// Samples of shape `S` with class labels `0..N`.
pub struct ClassDataset<S: Shape, const N: usize> {
    rows: Arc<Rows>,
    labels: Arc<Vec<u32>>,
    shape: PhantomData<S>,
}

impl<S: Shape, const N: usize> Clone for ClassDataset<S, N> {
    fn clone(&self) -> Self {
        ClassDataset { rows: self.rows.clone(), labels: self.labels.clone(), shape: PhantomData }
    }
}

impl<S: Shape, const N: usize> std::fmt::Debug for ClassDataset<S, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClassDataset<{:?}, {N}>({} samples)", S::DIMS, self.labels.len())
    }
}

impl<S: Shape, const N: usize> ClassDataset<S, N> {
    /// `data` holds `labels.len()` samples of shape `S`, row-major. Every label must be below
    /// `N`; the first that is not is reported with its position. A NaN or infinite value is an
    /// [`Error::NonFinite`] naming its sample.
    pub fn new(data: Vec<f32>, labels: Vec<u32>) -> Result<Self> {
        if let Some((position, &label)) = labels.iter().enumerate().find(|(_, &l)| l as usize >= N) {
            return Err(Error::IndexOutOfRange {
                op: "ClassDataset::new (label)",
                index: label as i64,
                limit: N,
                position,
            });
        }
        let rows = Rows::new("ClassDataset::new", data, labels.len(), S::sample_numel())?;
        Ok(ClassDataset { rows, labels: Arc::new(labels), shape: PhantomData })
    }

    /// The labels, in sample order.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    /// The same samples viewed with another per-sample shape of equal size (no copy), e.g.
    /// MNIST's `[1, 28, 28]` images as `[784]` vectors for an MLP.
    pub fn reshape<S2: Shape>(&self) -> Result<ClassDataset<S2, N>> {
        if S2::sample_numel() != S::sample_numel() {
            return Err(Error::shape(
                "ClassDataset::reshape",
                format!("samples of shape {:?} cannot be viewed as {:?}", S::DIMS, S2::DIMS),
            ));
        }
        Ok(ClassDataset { rows: self.rows.clone(), labels: self.labels.clone(), shape: PhantomData })
    }

    /// The first `n` samples (all if fewer), as a new dataset.
    pub fn take(&self, n: usize) -> Result<Self> {
        let n = n.min(self.len());
        let indices: Vec<usize> = (0..n).collect();
        let data = self.rows.select("ClassDataset::take", &indices, &Device::cpu())?.to_vec()?;
        Self::new(data, self.labels[..n].to_vec())
    }
}

impl<S: Shape, const N: usize> Dataset for ClassDataset<S, N> {
    type Sample = S;
    type Target = Class<N>;

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<S>, RawTensor)> {
        let rows = self.rows.select("ClassDataset::get_batch", indices, device)?;
        let inputs = Tensor::from_raw(rows.reshape(&S::with_batch(indices.len()))?)?;
        let labels: Vec<u32> = indices.iter().map(|&i| self.labels[i]).collect();
        let targets = RawTensor::from_indices(&labels, &[labels.len()], device)?;
        Ok((inputs, targets))
    }
}

/// Samples of shape `S` with real-valued targets of shape `T` (regression).
pub struct TensorDataset<S: Shape, T: Shape> {
    inputs: Arc<Rows>,
    targets: Arc<Rows>,
    shape: PhantomData<(S, T)>,
}

impl<S: Shape, T: Shape> Clone for TensorDataset<S, T> {
    fn clone(&self) -> Self {
        TensorDataset { inputs: self.inputs.clone(), targets: self.targets.clone(), shape: PhantomData }
    }
}

impl<S: Shape, T: Shape> std::fmt::Debug for TensorDataset<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorDataset<{:?}, {:?}>({} samples)", S::DIMS, T::DIMS, self.inputs.count())
    }
}

impl<S: Shape, T: Shape> TensorDataset<S, T> {
    /// `inputs` and `targets` row-major, with the same number of samples, all finite (else
    /// [`Error::NonFinite`] naming the sample).
    pub fn new(inputs: Vec<f32>, targets: Vec<f32>) -> Result<Self> {
        let per_target = T::sample_numel();
        if per_target == 0 || !targets.len().is_multiple_of(per_target) {
            return Err(Error::Data(format!(
                "TensorDataset::new: {} target values are not whole samples of shape {:?}",
                targets.len(),
                T::DIMS
            )));
        }
        let count = targets.len() / per_target;
        let inputs = Rows::new("TensorDataset::new (inputs)", inputs, count, S::sample_numel())?;
        let targets = Rows::new("TensorDataset::new (targets)", targets, count, per_target)?;
        Ok(TensorDataset { inputs, targets, shape: PhantomData })
    }
}

impl<S: Shape, T: Shape> Dataset for TensorDataset<S, T> {
    type Sample = S;
    type Target = Regression<T>;

    fn len(&self) -> usize {
        self.inputs.count()
    }

    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<S>, RawTensor)> {
        let op = "TensorDataset::get_batch";
        let inputs = self.inputs.select(op, indices, device)?.reshape(&S::with_batch(indices.len()))?;
        let targets = self.targets.select(op, indices, device)?.reshape(&T::with_batch(indices.len()))?;
        Ok((Tensor::from_raw(inputs)?, targets))
    }
}
