//! The LSTM layer (PyTorch's `nn.LSTM` with `batch_first=True`).

use super::recurrent::{RecurrentConfig, RecurrentStack};
use super::{Module, Param};
use crate::{Device, RawTensor, Result};

/// `Lstm(hidden)` over `[B, T, F]`: `[B, T, H·dirs]`, or the last state `[B, H·dirs]` without
/// `return_sequences`. Gates `i, f, g, o`; parameters per layer and direction `weight_ih_l{k}
/// [4H, F]`, `weight_hh_l{k} [4H, H]`, `bias_ih_l{k}`, `bias_hh_l{k} [4H]` (`_reverse` for the
/// backward direction), as PyTorch names and lays them out. Zero initial states.
pub struct Lstm {
    stack: RecurrentStack,
}

impl Lstm {
    /// An LSTM of `hidden` units reading `input_size` features, parameters uniform in
    /// `±1/√hidden` (PyTorch's init) from `seed`.
    pub fn new(device: &Device, input_size: usize, hidden: usize, config: RecurrentConfig, seed: u64) -> Result<Self> {
        Ok(Lstm { stack: RecurrentStack::new("Lstm", 4, device, input_size, hidden, config, seed)? })
    }
}

impl Module for Lstm {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.stack.forward(x, |input, w, reverse| input.lstm(w, None, None, reverse))
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
