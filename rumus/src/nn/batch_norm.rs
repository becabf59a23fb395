//! Batch normalisation layers (PyTorch names: weight, bias, running_mean, running_var).

use super::{join_name, Module, Param};
use crate::{Device, Error, RawTensor, Result, RunningStats};

/// State shared by the 1-D and 2-D layers; they differ only in the input ranks they accept.
struct BatchNormState {
    weight: Param,
    bias: Param,
    running_mean: Param,
    running_var: Param,
    num_features: usize,
    eps: f32,
    momentum: f32,
    training: bool,
}

impl BatchNormState {
    fn new(op: &'static str, device: &Device, num_features: usize, eps: f32, momentum: f32) -> Result<Self> {
        if num_features == 0 {
            return Err(Error::invalid(op, "num_features must be positive"));
        }
        if !(0.0..=1.0).contains(&momentum) || eps.is_nan() || eps < 0.0 {
            return Err(Error::invalid(
                op,
                format!("momentum {momentum} must be in [0, 1] and eps {eps} non-negative"),
            ));
        }
        let shape = [num_features];
        Ok(BatchNormState {
            weight: Param::new(RawTensor::ones(&shape, device)?)?,
            bias: Param::new(RawTensor::zeros(&shape, device)?)?,
            running_mean: Param::buffer(RawTensor::zeros(&shape, device)?)?,
            running_var: Param::buffer(RawTensor::ones(&shape, device)?)?,
            num_features,
            eps,
            momentum,
            training: true,
        })
    }

    /// The batch norm, and with `relu` a ReLU in the same passes.
    fn forward(&self, x: &RawTensor, relu: bool) -> Result<RawTensor> {
        let running =
            RunningStats { mean: self.running_mean.tensor(), var: self.running_var.tensor(), momentum: self.momentum };
        let training = super::training_active(self.training);
        let (w, b) = (Some(self.weight.tensor()), Some(self.bias.tensor()));
        if relu {
            x.batch_norm_relu(w, b, Some(running), training, self.eps)
        } else {
            x.batch_norm(w, b, Some(running), training, self.eps)
        }
    }

    fn visit(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visitor(&join_name(prefix, "weight"), &self.weight);
        visitor(&join_name(prefix, "bias"), &self.bias);
        visitor(&join_name(prefix, "running_mean"), &self.running_mean);
        visitor(&join_name(prefix, "running_var"), &self.running_var);
    }

    fn check_input(&self, op: &'static str, x: &RawTensor, ranks: &[usize], expected: &str) -> Result<()> {
        if !ranks.contains(&x.rank()) || x.shape()[1] != self.num_features {
            return Err(Error::shape(
                op,
                format!("input {:?}: expected {expected} with {} channels", x.shape(), self.num_features),
            ));
        }
        Ok(())
    }
}

macro_rules! batch_norm_layer {
    ($(#[$doc:meta])* $name:ident, $ranks:expr, $expected:literal) => {
        $(#[$doc])*
        pub struct $name {
            state: BatchNormState,
        }

        impl $name {
            /// Weight ones, bias zeros, running mean zeros, running variance ones. `momentum` is
            /// the weight of each new batch in the running statistics (PyTorch uses 0.1).
            pub fn new(device: &Device, num_features: usize, eps: f32, momentum: f32) -> Result<Self> {
                Ok($name { state: BatchNormState::new(stringify!($name), device, num_features, eps, momentum)? })
            }

            /// The learned scale γ, `[num_features]` (initially ones).
            pub fn weight(&self) -> &Param {
                &self.state.weight
            }
            /// The learned shift β, `[num_features]` (initially zeros).
            pub fn bias(&self) -> &Param {
                &self.state.bias
            }
            /// The running mean used in evaluation mode (a non-trainable buffer, `[num_features]`).
            pub fn running_mean(&self) -> &Param {
                &self.state.running_mean
            }
            /// The running (unbiased) variance used in evaluation mode (a buffer, `[num_features]`).
            pub fn running_var(&self) -> &Param {
                &self.state.running_var
            }
            /// True in training mode, where batches are normalised by their own statistics and the
            /// running ones are updated.
            pub fn is_training(&self) -> bool {
                self.state.training
            }
        }

        impl Module for $name {
            fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
                self.state.check_input(stringify!($name), x, &$ranks, $expected)?;
                self.state.forward(x, false)
            }
            /// The batch norm with the ReLU in its own passes
            /// ([`RawTensor::batch_norm_relu`]): the values and gradients of `forward_raw`
            /// then `Relu`, without the ReLU's passes.
            fn forward_relu_raw(&self, x: &RawTensor) -> Result<RawTensor> {
                self.state.check_input(stringify!($name), x, &$ranks, $expected)?;
                self.state.forward(x, true)
            }
            fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
                self.state.visit(prefix, visitor);
            }
            fn set_training(&mut self, training: bool) {
                self.state.training = training;
            }
            fn describe(&self) -> String {
                format!("{}({})", stringify!($name), self.state.num_features)
            }
        }
    };
}

batch_norm_layer!(
    /// Batch norm over `[n, c]` or `[n, c, l]`: statistics per channel over the other axes.
    BatchNorm1d, [2, 3], "[batch, channels] or [batch, channels, length]"
);
batch_norm_layer!(
    /// Batch norm over `[n, c, h, w]`: statistics per channel over batch and space.
    BatchNorm2d, [4], "[batch, channels, height, width]"
);
