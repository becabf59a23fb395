//! The peephole over a layer list: a layer that applies a following `Relu` inside its own
//! passes at run time (`Module::forward_relu_raw`; the batch norms, through
//! `RawTensor::batch_norm_relu`, and `Residual`, through `RawTensor::add_relu`) is paired with
//! that `Relu`, which generation builds with
//! `Sequential::push_with_relu` / `with_relu` so that the forward runs one fused op instead of
//! two. The pair stays two layers of the plan: names, counts and `summary()` do not change.

use super::{Layer, LayerKind};

/// One call of the forward over a layer list: the layer at `index`, alone or with the `Relu`
/// after it (`with_relu`, which then takes no step of its own).
pub struct Step<'a> {
    pub index: usize,
    pub layer: &'a Layer,
    pub with_relu: bool,
}

/// Whether `layer`'s runtime type fuses a following ReLU: the batch norms (the ReLU in their
/// own passes) and `Residual` (its sum and the ReLU in one pass).
fn fuses_relu(layer: &Layer) -> bool {
    matches!(layer.kind, LayerKind::BatchNorm1d { .. } | LayerKind::BatchNorm2d { .. } | LayerKind::Residual { .. })
}

/// The steps of `layers`: every batch norm or `Residual` immediately followed by `Relu` paired
/// with it.
pub fn steps(layers: &[Layer]) -> Vec<Step<'_>> {
    let mut steps = Vec::with_capacity(layers.len());
    let mut index = 0;
    while let Some(layer) = layers.get(index) {
        let with_relu = fuses_relu(layer) && matches!(layers.get(index + 1).map(|l| &l.kind), Some(LayerKind::Relu));
        steps.push(Step { index, layer, with_relu });
        index += if with_relu { 2 } else { 1 };
    }
    steps
}
