//! An ordered list of modules run one after another.

use super::{join_name, KvCache, Module, Param};
use crate::{RawTensor, Result};

/// Modules applied in order. Parameter names are `<index>.<name>`, as in `nn.Sequential`.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    /// An empty sequence (the identity).
    pub fn new() -> Self {
        Sequential { layers: Vec::new() }
    }

    /// Appends a layer (builder style).
    pub fn with(mut self, layer: impl Module + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends a layer; it runs after the ones already there.
    pub fn push(&mut self, layer: Box<dyn Module>) {
        self.layers.push(layer);
    }

    /// The layers in the order they run.
    pub fn layers(&self) -> &[Box<dyn Module>] {
        &self.layers
    }

    /// Number of layers (not counting layers nested inside them).
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when the sequence has no layer.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let mut h = x.clone();
        for layer in &self.layers {
            h = layer.forward_raw(&h)?;
        }
        Ok(h)
    }

    /// Passes the cache through every layer in order.
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        let mut h = x.clone();
        for layer in &self.layers {
            h = layer.forward_cached(&h, cache)?;
        }
        Ok(h)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        for (i, layer) in self.layers.iter().enumerate() {
            layer.visit_params(&join_name(prefix, &i.to_string()), visitor);
        }
    }

    fn set_training(&mut self, training: bool) {
        for layer in &mut self.layers {
            layer.set_training(training);
        }
    }

    fn describe(&self) -> String {
        let inner: Vec<String> = self.layers.iter().map(|l| l.describe()).collect();
        format!("Sequential[{}]", inner.join(", "))
    }
}
