//! The GRU layer (PyTorch's `nn.GRU` with `batch_first=True`).

use super::recurrent::{RecurrentConfig, RecurrentStack};
use super::{Module, Param};
use crate::{Device, RawTensor, Result};

/// `Gru(hidden)` over `[B, T, F]`: `[B, T, H·dirs]`, or the last state `[B, H·dirs]` without
/// `return_sequences`. Gates `r, z, n`; parameters per layer and direction `weight_ih_l{k}
/// [3H, F]`, `weight_hh_l{k} [3H, H]`, `bias_ih_l{k}`, `bias_hh_l{k} [3H]` (`_reverse` for the
/// backward direction), as PyTorch names and lays them out. Zero initial state.
pub struct Gru {
    stack: RecurrentStack,
}

impl Gru {
    /// A GRU of `hidden` units reading `input_size` features, parameters uniform in
    /// `±1/√hidden` (PyTorch's init) from `seed`.
    pub fn new(device: &Device, input_size: usize, hidden: usize, config: RecurrentConfig, seed: u64) -> Result<Self> {
        Ok(Gru { stack: RecurrentStack::new("Gru", 3, device, input_size, hidden, config, seed)? })
    }
}

impl Module for Gru {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.stack.forward(x, |input, w, reverse| input.gru(w, None, reverse))
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.stack.visit_params(prefix, visitor);
    }
    fn set_training(&mut self, training: bool) {
        self.stack.set_training(training);
    }
    fn describe(&self) -> String {
        self.stack.describe()
    }
}
