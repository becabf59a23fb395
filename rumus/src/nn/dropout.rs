//! Dropout layer with a fresh, reproducible mask per call.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Module, Param};
use crate::{rng, RawTensor, Result};

/// Zeroes elements with probability `p` while training (scaling the rest by `1/(1-p)`); the
/// identity in evaluation mode. Call `k` uses a mask seeded from `(seed, k)`, so a run repeats
/// exactly while every call (and every layer with its own seed) gets a new mask.
#[derive(Debug)]
pub struct Dropout {
    p: f32,
    seed: u64,
    calls: AtomicU64,
    training: bool,
}

impl Dropout {
    /// `p` is checked when the layer runs (it must be in `[0, 1]`).
    pub fn new(p: f32, seed: u64) -> Self {
        Dropout { p, seed, calls: AtomicU64::new(0), training: true }
    }

    /// Probability that an element is zeroed while training.
    pub fn p(&self) -> f32 {
        self.p
    }

    /// True in training mode (the mask is applied); false in evaluation mode (the identity).
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// The mask seed of call `call`: both halves hashed so nearby seeds give unrelated streams.
    fn call_seed(&self, call: u64) -> u64 {
        let high = rng::pcg_hash(rng::seed_key(self.seed) ^ call as u32) as u64;
        let low = rng::pcg_hash(rng::seed_key(call) ^ 0x9e37_79b9) as u64;
        (high << 32) | low
    }
}

impl Module for Dropout {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        if !super::training_active(self.training) {
            return x.dropout(self.p, false, 0);
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        x.dropout(self.p, true, self.call_seed(call))
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn describe(&self) -> String {
        format!("Dropout({})", self.p)
    }
}
