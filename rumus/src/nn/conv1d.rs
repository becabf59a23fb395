//! 1-D convolution layer.

use super::module::visit_weight_and_bias;
use super::{init, Module, Param};
use crate::{Conv1dPadding, Device, Error, RawTensor, Result};

/// Hyper-parameters of [`Conv1d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dConfig {
    /// Channels of the input (C in `[N, C, L]`).
    pub in_channels: usize,
    /// Channels of the output (one filter each).
    pub out_channels: usize,
    /// Window length.
    pub kernel: usize,
    /// Step between windows, at least 1.
    pub stride: usize,
    /// Zeros added on each side, or `Same` (output length = input length, odd padding on the right).
    pub padding: Conv1dPadding,
    /// Spacing between the window's taps; 1 is a dense window.
    pub dilation: usize,
    /// Channel groups: each output channel sees `in_channels / groups` inputs; both channel counts must divide by it.
    pub groups: usize,
    /// Whether a bias `[out_channels]` is added.
    pub bias: bool,
}

impl Conv1dConfig {
    /// PyTorch's defaults around the required sizes: stride 1, no padding, dilation 1, one
    /// group, with bias.
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Conv1dConfig {
            in_channels,
            out_channels,
            kernel,
            stride: 1,
            padding: Conv1dPadding::Explicit(0),
            dilation: 1,
            groups: 1,
            bias: true,
        }
    }
}

/// `Conv1d(in => out, kernel)` over `[n, in, l]`: weight `[out, in/groups, k]`, bias `[out]`
/// (PyTorch's names and layout).
pub struct Conv1d {
    /// Filters `[out_channels, in_channels/groups, k]`.
    pub weight: Param,
    /// One bias per output channel, `[out_channels]`, if the layer has one.
    pub bias: Option<Param>,
    config: Conv1dConfig,
}

impl Conv1d {
    /// PyTorch's default init: weight and bias uniform in `±1/sqrt(fan_in)` with
    /// `fan_in = in/groups · k`.
    pub fn new(device: &Device, cfg: Conv1dConfig, seed: u64) -> Result<Self> {
        const OP: &str = "Conv1d";
        let sizes = [cfg.in_channels, cfg.out_channels, cfg.kernel, cfg.stride, cfg.dilation, cfg.groups];
        if sizes.contains(&0) {
            return Err(Error::invalid(OP, format!("sizes in {cfg:?} must be positive")));
        }
        if !cfg.in_channels.is_multiple_of(cfg.groups) || !cfg.out_channels.is_multiple_of(cfg.groups) {
            return Err(Error::invalid(
                OP,
                format!(
                    "in_channels {} and out_channels {} must be divisible by groups {}",
                    cfg.in_channels, cfg.out_channels, cfg.groups
                ),
            ));
        }
        if cfg.padding == Conv1dPadding::Same && cfg.stride != 1 {
            return Err(Error::invalid(OP, format!("padding 'same' needs stride 1, got stride {}", cfg.stride)));
        }
        let group_channels = cfg.in_channels / cfg.groups;
        let fan_in = group_channels * cfg.kernel;
        let (weight, bias) = init::conv_parameters(
            device,
            &[cfg.out_channels, group_channels, cfg.kernel],
            fan_in,
            cfg.out_channels,
            cfg.bias,
            seed,
        )?;
        Ok(Conv1d { weight, bias, config: cfg })
    }

    /// The hyper-parameters this layer was built with.
    pub fn config(&self) -> &Conv1dConfig {
        &self.config
    }
}

impl Module for Conv1d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let c = &self.config;
        x.conv1d(
            self.weight.tensor(),
            self.bias.as_ref().map(|b| b.tensor()),
            c.stride,
            c.padding,
            c.dilation,
            c.groups,
        )
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visit_weight_and_bias(prefix, &self.weight, self.bias.as_ref(), visitor);
    }

    fn describe(&self) -> String {
        let c = &self.config;
        let mut s = format!("Conv1d({} => {}, kernel = {}", c.in_channels, c.out_channels, c.kernel);
        if c.stride != 1 {
            s += &format!(", stride = {}", c.stride);
        }
        match c.padding {
            Conv1dPadding::Explicit(0) => {}
            Conv1dPadding::Explicit(p) => s += &format!(", padding = {p}"),
            Conv1dPadding::Same => s += ", padding = same",
        }
        if c.dilation != 1 {
            s += &format!(", dilation = {}", c.dilation);
        }
        if c.groups != 1 {
            s += &format!(", groups = {}", c.groups);
        }
        if !c.bias {
            s += ", bias = false";
        }
        s + ")"
    }
}
