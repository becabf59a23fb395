//! Embedding lookup table.

use super::{init, join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Maps u32 token ids `[n, t]` (any shape) to rows of `weight` `[num_embeddings, dim]`,
/// giving `[n, t, dim]`.
pub struct Embedding {
    /// The table `[num_embeddings, dim]`: row `i` is token `i`'s vector.
    pub weight: Param,
}

impl Embedding {
    /// Weight drawn from `N(0, 1)` (PyTorch's default).
    pub fn new(device: &Device, num_embeddings: usize, embedding_dim: usize, seed: u64) -> Result<Self> {
        Embedding::with_std(device, num_embeddings, embedding_dim, 1.0, seed)
    }

    /// Weight drawn from `N(0, std)` (GPT-2 and nanoGPT use `std = 0.02`).
    pub fn with_std(device: &Device, num_embeddings: usize, embedding_dim: usize, std: f32, seed: u64) -> Result<Self> {
        if !std.is_finite() || std < 0.0 {
            return Err(Error::invalid("Embedding", format!("std {std} must be finite and non-negative")));
        }
        if num_embeddings == 0 || embedding_dim == 0 {
            return Err(Error::invalid(
                "Embedding",
                format!("num_embeddings {num_embeddings} and embedding_dim {embedding_dim} must be positive"),
            ));
        }
        Ok(Embedding { weight: Param::new(init::normal(&[num_embeddings, embedding_dim], std, seed, device)?)? })
    }
}

impl Module for Embedding {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.embedding(self.weight.tensor())
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "weight"), &self.weight);
    }
    fn describe(&self) -> String {
        format!("Embedding({}, {})", self.weight.shape()[0], self.weight.shape()[1])
    }
}
