//! Learned absolute position embeddings (GPT-2's and nanoGPT's `wpe`).

use super::{init, join_name, KvCache, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Adds a learned vector per position to `[batch, t, dim]` inputs: row `i` of
/// `weight [block, dim]` to position `i`. Sequences longer than `block` are an error.
pub struct PositionalEmbedding {
    /// The table `[block, dim]`, one row per position.
    pub weight: Param,
}

impl PositionalEmbedding {
    /// A `[block, dim]` table drawn from `N(0, std)` (nanoGPT uses `std = 0.02`).
    pub fn new(device: &Device, block: usize, dim: usize, std: f32, seed: u64) -> Result<Self> {
        const OP: &str = "PositionalEmbedding";
        if block == 0 || dim == 0 {
            return Err(Error::invalid(OP, format!("block {block} and dim {dim} must be positive")));
        }
        if !std.is_finite() || std < 0.0 {
            return Err(Error::invalid(OP, format!("std {std} must be finite and non-negative")));
        }
        Ok(PositionalEmbedding { weight: Param::new(init::normal(&[block, dim], std, seed, device)?)? })
    }

    /// The longest sequence the table covers.
    pub fn block(&self) -> usize {
        self.weight.shape()[0]
    }

    /// The embedding width.
    pub fn dim(&self) -> usize {
        self.weight.shape()[1]
    }

    /// `x [batch, t, dim]` plus rows `start..start + t` of the table.
    fn add_rows(&self, x: &RawTensor, start: usize) -> Result<RawTensor> {
        const OP: &str = "PositionalEmbedding";
        let (block, dim) = (self.block(), self.dim());
        if x.rank() != 3 || x.shape()[2] != dim {
            return Err(Error::shape(OP, format!("input {:?}: expected [batch, time, {dim}]", x.shape())));
        }
        let t = x.shape()[1];
        let end = start.checked_add(t).filter(|&end| end <= block).ok_or_else(|| {
            let detail = if start == 0 {
                format!("a sequence of t = {t} positions exceeds the block of {block}")
            } else {
                format!("t = {t} new positions after {start} cached ones exceed the block of {block}")
            };
            Error::shape(OP, detail)
        })?;
        x.add(&self.weight.tensor().narrow(0, start, end)?)
    }
}

impl Module for PositionalEmbedding {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.add_rows(x, 0)
    }

    /// Adds the rows of the new positions: `cache.position()` onwards.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        self.add_rows(x, cache.position())
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "weight"), &self.weight);
    }

    fn describe(&self) -> String {
        format!("PositionalEmbedding({}, {})", self.block(), self.dim())
    }
}
