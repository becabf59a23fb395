//! Batching: index order per epoch (seeded shuffle), batch cutting, and a prefetch thread that
//! assembles the next batch while the current one trains.

use std::ops::ControlFlow;
use std::sync::mpsc;

use super::transforms::Augment;
use super::Dataset;
use crate::rng::Rng;
use crate::{Device, Error, RawTensor, Result, Tensor};

/// One batch: typed inputs and their targets.
pub struct Batch<S: crate::Shape> {
    /// The samples, `[batch, ...S::DIMS]`.
    pub inputs: Tensor<S>,
    /// Their targets, one row per sample: u32 classes `[batch]` (or `[batch, T]` for sequences) or
    /// f32 regression targets `[batch, ...dims]`.
    pub targets: RawTensor,
}

impl<S: crate::Shape> Batch<S> {
    /// Number of samples in the batch (the last batch of an epoch may be short).
    pub fn len(&self) -> usize {
        self.inputs.batch_size()
    }

    /// True when the batch holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Cuts a dataset (or a subset of its indices) into batches on a device.
pub struct DataLoader<'a, D: Dataset> {
    dataset: &'a D,
    indices: Vec<usize>,
    batch_size: usize,
    shuffle_seed: Option<u64>,
    drop_last: bool,
    prefetch: bool,
    device: Device,
    augment: Option<Augment>,
    /// Batch `b`'s first sample is at `b · stride + offset` in the epoch's order, as the
    /// augmentation's draws see it (data-parallel: the global order every rank shares).
    positions: (usize, usize),
}

impl<'a, D: Dataset> DataLoader<'a, D> {
    /// Batches of `batch_size` samples of every sample, in order, on `device`, prefetched.
    /// A batch size of 0 is an error.
    pub fn new(dataset: &'a D, batch_size: usize, device: &Device) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::invalid("DataLoader", "batch_size must be at least 1"));
        }
        Ok(DataLoader {
            dataset,
            indices: (0..dataset.len()).collect(),
            batch_size,
            shuffle_seed: None,
            drop_last: false,
            prefetch: true,
            device: device.clone(),
            augment: None,
            positions: (batch_size, 0),
        })
    }

    /// Shuffles every epoch; epoch `e`'s order depends only on `(seed, e)`.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle_seed = Some(seed);
        self
    }

    /// Drops the last batch when it is smaller than `batch_size`.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Assembles the next batch on a background thread (default on).
    pub fn prefetch(mut self, prefetch: bool) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Transforms every batch's inputs with `augment` (the sample at position `p` of epoch
    /// `e`'s order draws from `(seed, e, p)`, see [`Augment::apply`]), on the loader's device;
    /// `None` leaves them as they are.
    pub fn augment(mut self, augment: Option<Augment>) -> Self {
        self.augment = augment.filter(|a| !a.is_empty());
        self
    }

    /// Batch `b`'s first sample is at position `b · stride + offset` of a larger order (rank
    /// `r` of `n` with per-rank batch `B`: `stride = B · n`, `offset = r · B`), for the
    /// augmentation's draws.
    pub(crate) fn sample_positions(mut self, stride: usize, offset: usize) -> Self {
        self.positions = (stride, offset);
        self
    }

    /// The augmentation applied to each batch, if any.
    pub fn augmentation(&self) -> Option<&Augment> {
        self.augment.as_ref()
    }

    /// Restricts the loader to these sample indices (e.g. a train/validation split).
    pub fn with_indices(mut self, indices: Vec<usize>) -> Result<Self> {
        let len = self.dataset.len();
        if let Some((position, &i)) = indices.iter().enumerate().find(|(_, &i)| i >= len) {
            return Err(Error::IndexOutOfRange {
                op: "DataLoader::with_indices",
                index: i as i64,
                limit: len,
                position,
            });
        }
        self.indices = indices;
        Ok(self)
    }

    /// Samples per batch (the last batch is shorter unless `drop_last`).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Samples visited per epoch (before `drop_last`).
    pub fn num_samples(&self) -> usize {
        self.indices.len()
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        if self.drop_last {
            self.indices.len() / self.batch_size
        } else {
            self.indices.len().div_ceil(self.batch_size)
        }
    }

    /// True when an epoch yields no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sample order of epoch `epoch` (0-based), cut to whole batches if `drop_last`.
    pub fn epoch_order(&self, epoch: usize) -> Vec<usize> {
        let mut order = self.indices.clone();
        if let Some(seed) = self.shuffle_seed {
            Rng::new(seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).shuffle(&mut order);
        }
        if self.drop_last {
            order.truncate(self.len() * self.batch_size);
        }
        order
    }

    /// Batches of epoch `epoch`, assembled on the calling thread.
    pub fn iter(&self, epoch: usize) -> impl Iterator<Item = Result<Batch<D::Sample>>> + '_ {
        let order = self.epoch_order(epoch);
        let chunks: Vec<Vec<usize>> = order.chunks(self.batch_size).map(|c| c.to_vec()).collect();
        chunks.into_iter().enumerate().map(move |(b, chunk)| self.load(&chunk, epoch, b))
    }

    /// Batch `b` of epoch `epoch`, the samples at `indices`, augmented if asked.
    fn load(&self, indices: &[usize], epoch: usize, b: usize) -> Result<Batch<D::Sample>> {
        let (inputs, targets) = self.dataset.get_batch(indices, &self.device)?;
        let inputs = match &self.augment {
            Some(augment) => {
                let (stride, offset) = self.positions;
                let first = b
                    .checked_mul(stride)
                    .and_then(|p| p.checked_add(offset))
                    .ok_or_else(|| Error::invalid("DataLoader", format!("batch {b}: sample position overflows")))?;
                Tensor::from_raw(augment.apply(inputs.raw(), epoch, first)?)?
            }
            None => inputs,
        };
        Ok(Batch { inputs, targets })
    }

    /// Runs `f` on every batch of epoch `epoch` in order. With prefetch on, the next batch is
    /// assembled on a background thread meanwhile. `f` returning `Break` stops early.
    pub fn for_each(&self, epoch: usize, mut f: impl FnMut(Batch<D::Sample>) -> Result<ControlFlow<()>>) -> Result<()> {
        if !self.prefetch {
            for batch in self.iter(epoch) {
                if f(batch?)?.is_break() {
                    break;
                }
            }
            return Ok(());
        }
        let order = self.epoch_order(epoch);
        std::thread::scope(|scope| {
            // One batch waits in the channel while the next is assembled: enough to hide the
            // assembly behind a training step without holding many batches in memory.
            let (tx, rx) = mpsc::sync_channel::<Result<Batch<D::Sample>>>(1);
            let order = &order;
            scope.spawn(move || {
                for (b, chunk) in order.chunks(self.batch_size).enumerate() {
                    if tx.send(self.load(chunk, epoch, b)).is_err() {
                        break; // the consumer stopped early
                    }
                }
            });
            let result = (|| -> Result<()> {
                for batch in rx.iter() {
                    if f(batch?)?.is_break() {
                        break;
                    }
                }
                Ok(())
            })();
            // Dropping the receiver makes the producer's next send fail, so it stops.
            drop(rx);
            result
        })
    }
}
