//! An ordered list of modules run one after another.

use super::{join_name, KvCache, Module, Param};
use crate::{RawTensor, Result};

/// Modules applied in order. Parameter names are `<index>.<name>`, as in `nn.Sequential`.
///
/// A layer appended with [`Sequential::with_relu`] or [`Sequential::push_with_relu`] is
/// followed by a [`Relu`](super::Relu) that runs with it, through the layer's
/// [`Module::forward_relu_raw`] (one fused pass for a batch norm or a residual's sum): the two
/// are still two layers for names, `layers()`, `len()` and `describe()`.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
    /// Per layer: it runs together with the `Relu` after it.
    with_relu: Vec<bool>,
}

impl Sequential {
    /// An empty sequence (the identity).
    pub fn new() -> Self {
        Sequential { layers: Vec::new(), with_relu: Vec::new() }
    }

    /// Appends a layer (builder style).
    pub fn with(mut self, layer: impl Module + 'static) -> Self {
        self.push(Box::new(layer));
        self
    }

    /// Appends a layer and a [`Relu`](super::Relu) after it, run as one (builder style): see
    /// [`Sequential::push_with_relu`].
    pub fn with_relu(mut self, layer: impl Module + 'static) -> Self {
        self.push_with_relu(Box::new(layer));
        self
    }

    /// Appends a layer; it runs after the ones already there.
    pub fn push(&mut self, layer: Box<dyn Module>) {
        self.layers.push(layer);
        self.with_relu.push(false);
    }

    /// Appends `layer` and a [`Relu`](super::Relu) after it, which the forward runs as one call
    /// of `layer`'s [`Module::forward_relu_raw`] (a batch norm applies the ReLU in its own
    /// passes, a residual in its sum's). Values, gradients, parameter names and the two layers'
    /// places in `layers()` are those of `push(layer)` then `push(Box::new(Relu))`.
    pub fn push_with_relu(&mut self, layer: Box<dyn Module>) {
        self.layers.push(layer);
        self.with_relu.push(true);
        self.layers.push(Box::new(super::Relu));
        self.with_relu.push(false);
    }

    /// Whether the layer at `index` runs together with the `Relu` after it (appended with
    /// [`Sequential::with_relu`] or [`Sequential::push_with_relu`]).
    pub fn runs_with_relu(&self, index: usize) -> bool {
        self.with_relu.get(index).copied().unwrap_or(false)
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
        let mut i = 0;
        while let Some(layer) = self.layers.get(i) {
            if self.with_relu[i] {
                // The Relu at i + 1 runs inside this call.
                h = layer.forward_relu_raw(&h)?;
                i += 2;
            } else {
                h = layer.forward_raw(&h)?;
                i += 1;
            }
        }
        Ok(h)
    }

    /// Passes the cache through every layer in order (each alone: a layer's `forward_cached`
    /// may differ from its `forward_raw`, so a fused Relu runs as its own layer here).
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
