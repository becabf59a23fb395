//! What the LSTM and GRU layers share: their configuration and the stack of layers and
//! directions, with PyTorch's parameter names and layouts (`weight_ih_l0 [G·H, F]`,
//! `weight_hh_l0 [G·H, H]`, `bias_ih_l0`, `bias_hh_l0 [G·H]`, `…_l0_reverse` for the backward
//! direction), so checkpoints interchange with `nn.LSTM` / `nn.GRU`.

use super::{init, join_name, Dropout, Module, Param};
use crate::{Device, Error, RawTensor, RecurrentOutput, RecurrentWeights, Result};

/// The options of [`Lstm`](super::Lstm) and [`Gru`](super::Gru) beside the sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecurrentConfig {
    /// Stacked layers (PyTorch's `num_layers`); at least 1.
    pub layers: usize,
    /// A second direction per layer, walking the sequence backwards; outputs are concatenated
    /// (forward first), so every layer after the first sees `2·H` features.
    pub bidirectional: bool,
    /// Dropout on the outputs of every layer but the last, while training (in `[0, 1)`).
    pub dropout: f32,
    /// `true`: the output at every step `[B, T, H·dirs]`; `false`: the last state
    /// `[B, H·dirs]` (the forward direction after the last step, the backward one after the
    /// first, as PyTorch's `h_n` of the last layer).
    pub return_sequences: bool,
}

impl Default for RecurrentConfig {
    /// One unidirectional layer without dropout, returning every step.
    fn default() -> Self {
        RecurrentConfig { layers: 1, bidirectional: false, dropout: 0.0, return_sequences: true }
    }
}

/// The four tensors of one direction of one layer.
struct Direction {
    w_ih: Param,
    w_hh: Param,
    b_ih: Param,
    b_hh: Param,
}

/// The stacked layers of an LSTM (4 gates) or a GRU (3 gates).
pub(crate) struct RecurrentStack {
    name: &'static str,
    input_size: usize,
    hidden: usize,
    config: RecurrentConfig,
    /// Per layer, the forward direction then (bidirectional) the backward one.
    directions: Vec<Vec<Direction>>,
    dropout: Dropout,
}

impl RecurrentStack {
    /// Parameters uniform in `±1/√hidden` (PyTorch's init), each from its own seed.
    pub(crate) fn new(
        name: &'static str,
        gates: usize,
        device: &Device,
        input_size: usize,
        hidden: usize,
        config: RecurrentConfig,
        seed: u64,
    ) -> Result<Self> {
        if input_size == 0 || hidden == 0 || config.layers == 0 {
            return Err(Error::invalid(
                name,
                format!("input size {input_size}, hidden {hidden} and layers {} must be positive", config.layers),
            ));
        }
        if !(0.0..1.0).contains(&config.dropout) {
            return Err(Error::invalid(name, format!("dropout {} must be in [0, 1)", config.dropout)));
        }
        let dirs = if config.bidirectional { 2 } else { 1 };
        let rows = crate::layout::checked_mul(name, "gates x hidden", gates, hidden)?;
        let stacked = crate::layout::checked_mul(name, "hidden x directions", hidden, dirs)?;
        let bound = 1.0 / (hidden as f32).sqrt();
        let mut next_seed = seed;
        let mut param = |shape: &[usize]| -> Result<Param> {
            next_seed = next_seed.wrapping_add(1);
            Param::new(init::uniform(shape, bound, next_seed, device)?)
        };
        let mut directions = Vec::with_capacity(config.layers);
        for layer in 0..config.layers {
            let features = if layer == 0 { input_size } else { stacked };
            let mut layer_dirs = Vec::with_capacity(dirs);
            for _ in 0..dirs {
                layer_dirs.push(Direction {
                    w_ih: param(&[rows, features])?,
                    w_hh: param(&[rows, hidden])?,
                    b_ih: param(&[rows])?,
                    b_hh: param(&[rows])?,
                });
            }
            directions.push(layer_dirs);
        }
        let dropout = Dropout::new(config.dropout, seed ^ 0x5eed_d50b);
        Ok(RecurrentStack { name, input_size, hidden, config, directions, dropout })
    }

    /// `x [B, T, F]` through every layer; `cell` runs one direction of one layer.
    pub(crate) fn forward(
        &self,
        x: &RawTensor,
        cell: impl Fn(&RawTensor, &RecurrentWeights<'_>, bool) -> Result<RecurrentOutput>,
    ) -> Result<RawTensor> {
        if x.rank() != 3 || x.shape()[2] != self.input_size {
            return Err(Error::shape(
                self.name,
                format!("input {:?}: expected [batch, steps, {}]", x.shape(), self.input_size),
            ));
        }
        let mut input = x.clone();
        let mut last = Vec::new();
        for (k, layer) in self.directions.iter().enumerate() {
            if k > 0 {
                input = self.dropout.forward_raw(&input)?;
            }
            let mut outputs = Vec::with_capacity(layer.len());
            last.clear();
            for (d, dir) in layer.iter().enumerate() {
                let w = RecurrentWeights {
                    w_ih: dir.w_ih.tensor(),
                    w_hh: dir.w_hh.tensor(),
                    b_ih: Some(dir.b_ih.tensor()),
                    b_hh: Some(dir.b_hh.tensor()),
                };
                let out = cell(&input, &w, d == 1)?;
                outputs.push(out.y);
                last.push(out.h_n);
            }
            input = match outputs.as_slice() {
                [y] => y.clone(),
                ys => RawTensor::concat(&ys.iter().collect::<Vec<_>>(), 2)?,
            };
        }
        if self.config.return_sequences {
            return Ok(input);
        }
        match last.as_slice() {
            [h] => Ok(h.clone()),
            hs => RawTensor::concat(&hs.iter().collect::<Vec<_>>(), 1),
        }
    }

    pub(crate) fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        for (k, layer) in self.directions.iter().enumerate() {
            for (d, dir) in layer.iter().enumerate() {
                let suffix = if d == 1 { "_reverse" } else { "" };
                for (what, p) in
                    [("weight_ih", &dir.w_ih), ("weight_hh", &dir.w_hh), ("bias_ih", &dir.b_ih), ("bias_hh", &dir.b_hh)]
                {
                    visitor(&join_name(prefix, &format!("{what}_l{k}{suffix}")), p);
                }
            }
        }
    }

    pub(crate) fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }

    pub(crate) fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "{}({} => {}; layers = {}, bidirectional = {}, dropout = {}, return_sequences = {})",
            self.name, self.input_size, self.hidden, c.layers, c.bidirectional, c.dropout, c.return_sequences
        )
    }
}
