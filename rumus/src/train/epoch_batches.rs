//! Which batches make up one epoch of `fit`: one pass over the training samples, or, with
//! `Fit::steps_per_epoch`, a fixed number of batches taken in turn from the loader's successive
//! shuffled passes (so every epoch sees fresh samples, and a pass may span epochs).

use std::collections::VecDeque;
use std::ops::ControlFlow;

use crate::data::{Batch, DataLoader, Dataset};
use crate::{Device, Error, Result};

/// The batches of each epoch.
pub(crate) struct EpochBatches<'a, D: Dataset> {
    dataset: &'a D,
    device: Device,
    loader: DataLoader<'a, D>,
    prefetch: bool,
    stream: Option<Stream>,
    /// Data-parallel: `(rank, size)`; this rank takes its slice of every global batch.
    shard: Option<(usize, usize)>,
}

/// The sample stream behind fixed-size epochs: the loader's pass orders one after another.
struct Stream {
    /// Batches per epoch.
    batches: usize,
    /// Samples drawn from passes but not yet trained on, in order.
    pending: VecDeque<usize>,
    /// The next pass of the loader to draw from.
    next_pass: usize,
}

impl<'a, D: Dataset> EpochBatches<'a, D> {
    /// One pass of `loader` per epoch, or `batches` full batches per epoch when given. The
    /// loader must yield at least one batch per pass.
    pub(crate) fn new(
        dataset: &'a D,
        device: &Device,
        loader: DataLoader<'a, D>,
        prefetch: bool,
        batches: Option<usize>,
    ) -> Self {
        let stream = batches.map(|batches| Stream { batches, pending: VecDeque::new(), next_pass: 0 });
        EpochBatches { dataset, device: device.clone(), loader, prefetch, stream, shard: None }
    }

    /// Rank `rank` of `size` trains on the `rank`-th `batch_size` samples of every global batch
    /// of `batch_size · size` (see `distributed::shard_global_batches`).
    pub(crate) fn shard(mut self, rank: usize, size: usize) -> Self {
        self.shard = Some((rank, size));
        self
    }

    /// Whether an epoch has no batch.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Batches per epoch.
    pub(crate) fn len(&self) -> usize {
        match (&self.stream, self.shard) {
            (Some(s), _) => s.batches,
            (None, Some((_, size))) => self.loader.num_samples() / self.loader.batch_size().saturating_mul(size).max(1),
            (None, None) => self.loader.len(),
        }
    }

    /// The samples of `order` this rank trains on, in order.
    fn mine(&self, order: Vec<usize>) -> Vec<usize> {
        match self.shard {
            Some((rank, size)) => {
                crate::distributed::shard_global_batches(&order, self.loader.batch_size(), rank, size)
            }
            None => order,
        }
    }

    /// Runs `f` on every batch of epoch `epoch` in order.
    pub(crate) fn for_each(
        &mut self,
        epoch: usize,
        f: impl FnMut(Batch<D::Sample>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let batch_size = self.loader.batch_size();
        let Some(stream) = &mut self.stream else {
            if self.shard.is_none() {
                return self.loader.for_each(epoch, f);
            }
            let indices = self.mine(self.loader.epoch_order(epoch));
            return self.rank_loader(indices)?.for_each(epoch, f);
        };
        let ranks = self.shard.map_or(1, |(_, size)| size);
        let need = stream.batches.checked_mul(batch_size).and_then(|n| n.checked_mul(ranks)).ok_or_else(|| {
            Error::invalid("fit", format!("steps_per_epoch: {} batches of {batch_size} overflow", stream.batches))
        })?;
        while stream.pending.len() < need {
            let order = self.loader.epoch_order(stream.next_pass);
            if order.is_empty() {
                return Err(Error::Data("fit: a pass over the training samples gives no batch".into()));
            }
            stream.pending.extend(order);
            stream.next_pass += 1;
        }
        let indices: Vec<usize> = stream.pending.drain(..need).collect();
        // The epoch numbers the augmentation's draws (the indices are already in order).
        let indices = self.mine(indices);
        self.rank_loader(indices)?.for_each(epoch, f)
    }

    /// A loader over `indices` in order, augmented as asked, each sample drawing the
    /// augmentation of its position in the epoch's global order (a sharded rank's batch `b` is
    /// the `rank`-th slice of global batch `b`), so ranks draw for their own samples what one
    /// process would.
    fn rank_loader(&self, indices: Vec<usize>) -> Result<DataLoader<'a, D>> {
        let batch_size = self.loader.batch_size();
        let (rank, size) = self.shard.unwrap_or((0, 1));
        let stride = batch_size.checked_mul(size).ok_or_else(|| Error::invalid("fit", "global batch overflows"))?;
        Ok(DataLoader::new(self.dataset, batch_size, &self.device)?
            .prefetch(self.prefetch)
            .with_indices(indices)?
            .augment(self.loader.augmentation().cloned())
            .sample_positions(stride, rank * batch_size))
    }
}
