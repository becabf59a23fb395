//! The key/value cache of incremental decoding.

use crate::RawTensor;

/// Keys and values of the positions already processed, one slot per attention layer in the
/// order the layers run, so that each new token costs one step instead of a full re-run.
///
/// A pass over the model calls [`Module::forward_cached`](super::Module::forward_cached) with
/// the new positions only; each attention layer takes the next slot ([`KvCache::next_slot`]) and
/// appends its keys and values; [`KvCache::end_pass`] then advances the position. The tensors
/// stay on the model's device. Layers that number positions (`PositionalEmbedding`) read
/// [`KvCache::position`].
#[derive(Default)]
pub struct KvCache {
    position: usize,
    slots: Vec<Option<(RawTensor, RawTensor)>>,
    cursor: usize,
}

impl KvCache {
    /// An empty cache at position 0.
    pub fn new() -> Self {
        KvCache::default()
    }

    /// Number of positions already in the cache: the position of the first new input row.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The next attention layer's slot in this pass: its cached `(keys, values)`, if any.
    pub fn next_slot(&mut self) -> &mut Option<(RawTensor, RawTensor)> {
        if self.cursor == self.slots.len() {
            self.slots.push(None);
        }
        self.cursor += 1;
        &mut self.slots[self.cursor - 1]
    }

    /// Number of slots held: the attention layers that have used this cache.
    pub fn layers(&self) -> usize {
        self.slots.len()
    }

    /// Number of slots taken so far in the current pass. After a full pass over a model it
    /// equals [`KvCache::layers`]; zero means the model's `forward_cached` ignored the cache.
    pub fn taken_this_pass(&self) -> usize {
        self.cursor
    }

    /// Ends a pass that added `new_positions` positions.
    pub fn end_pass(&mut self, new_positions: usize) {
        self.position += new_positions;
        self.cursor = 0;
    }

    /// Forgets every position.
    pub fn clear(&mut self) {
        self.position = 0;
        self.slots.clear();
        self.cursor = 0;
    }
}
