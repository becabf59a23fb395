//! Layers that keep the shape and have no parameters: activations, `Dropout`, the softmaxes.

use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{err, Ctx, Site};
use crate::parse::Result;

pub fn dropout(s: &Site, ctx: &mut Ctx) -> Result<Layer> {
    let p = s.args.float("p", 0.5) as f32;
    Ok(s.same_shape(LayerKind::Dropout { p, seed: ctx.seed() }))
}

pub fn relu(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Relu))
}

pub fn sigmoid(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Sigmoid))
}

pub fn tanh(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Tanh))
}

pub fn gelu(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Gelu))
}

pub fn gelu_tanh(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::GeluTanh))
}

pub fn silu(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Silu))
}

pub fn leaky_relu(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let slope = s.args.float("slope", 0.01) as f32;
    Ok(s.same_shape(LayerKind::LeakyRelu { slope }))
}

pub fn softmax(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::Softmax { axis: axis(s)? }))
}

pub fn log_softmax(s: &Site, _: &mut Ctx) -> Result<Layer> {
    Ok(s.same_shape(LayerKind::LogSoftmax { axis: axis(s)? }))
}

/// The `axis` argument, checked against the input's rank (negative counts from the end).
fn axis(s: &Site) -> Result<isize> {
    let (call, prod) = (s.call, s.input);
    let rank = prod.shape.len() as i64;
    let axis = s.args.int("axis", -1);
    if axis >= rank || axis < -rank {
        return Err(err(
            s.arg_tokens("axis"),
            format!("{call}: axis {axis} is out of range, because {} (rank {rank}; the batch axis is not counted)\nhint: use an axis in {}..{rank}", prod.got(), -rank),
        ));
    }
    Ok(axis as isize)
}
