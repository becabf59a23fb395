//! Parameter-free elementwise layers.

use super::{Module, Param};
use crate::{Error, RawTensor, Result};

macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, |$x:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Module for $name {
            fn forward_raw(&self, $x: &RawTensor) -> Result<RawTensor> {
                $body
            }
            fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
            fn describe(&self) -> String {
                stringify!($name).to_string()
            }
        }
    };
}

activation!(/// `max(x, 0)`
    Relu, |x| x.relu());
activation!(/// `1 / (1 + e^-x)`
    Sigmoid, |x| x.sigmoid());
activation!(/// Hyperbolic tangent.
    Tanh, |x| x.tanh());
activation!(/// GELU, exact erf form.
    Gelu, |x| x.gelu());
activation!(/// GELU, tanh approximation.
    GeluTanh, |x| x.gelu_tanh());
activation!(/// `x · sigmoid(x)`.
    Silu, |x| x.silu());

/// `x` for positive inputs, `slope · x` otherwise.
#[derive(Clone, Copy, Debug)]
pub struct LeakyRelu {
    /// Slope for negative inputs (PyTorch's default is 0.01).
    pub negative_slope: f32,
}

impl Module for LeakyRelu {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.leaky_relu(self.negative_slope)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        format!("LeakyRelu({})", self.negative_slope)
    }
}

/// Softmax over a per-sample axis (`axis` counts per-sample axes; the batch axis is not one).
#[derive(Clone, Copy, Debug)]
pub struct Softmax {
    /// The per-sample axis normalised over; negative counts from the last (-1: the last axis).
    pub axis: isize,
}

/// Log-softmax over a per-sample axis.
#[derive(Clone, Copy, Debug)]
pub struct LogSoftmax {
    /// The per-sample axis normalised over; negative counts from the last (-1: the last axis).
    pub axis: isize,
}

/// Maps a per-sample axis (negative counts from the end) to a batch tensor's axis.
fn batch_axis(op: &'static str, axis: isize) -> Result<isize> {
    if axis < 0 {
        return Ok(axis);
    }
    axis.checked_add(1).ok_or_else(|| Error::invalid(op, format!("axis {axis} is out of range")))
}

impl Module for Softmax {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.softmax(batch_axis("softmax", self.axis)?)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        format!("Softmax(axis = {})", self.axis)
    }
}

impl Module for LogSoftmax {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.log_softmax(batch_axis("log_softmax", self.axis)?)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        format!("LogSoftmax(axis = {})", self.axis)
    }
}
