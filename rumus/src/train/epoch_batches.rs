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
        EpochBatches { dataset, device: device.clone(), loader, prefetch, stream }
    }

    /// Batches per epoch.
    pub(crate) fn len(&self) -> usize {
        self.stream.as_ref().map_or(self.loader.len(), |s| s.batches)
    }

    /// Runs `f` on every batch of epoch `epoch` in order.
    pub(crate) fn for_each(
        &mut self,
        epoch: usize,
        f: impl FnMut(Batch<D::Sample>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let Some(stream) = &mut self.stream else {
            return self.loader.for_each(epoch, f);
        };
        let batch_size = self.loader.batch_size();
        let need = stream.batches.checked_mul(batch_size).ok_or_else(|| {
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
        DataLoader::new(self.dataset, batch_size, &self.device)?
            .prefetch(self.prefetch)
            .with_indices(indices)?
            .augment(self.loader.augmentation().cloned())
            .for_each(epoch, f)
    }
}
