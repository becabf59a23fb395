//! 2-D convolution layer.

use super::module::visit_weight_and_bias;
use super::{init, Module, Param};
use crate::{Device, Error, RawTensor, Result};

/// Hyper-parameters of [`Conv2d`], each pair `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    /// Channels of the input (C in `[N, C, H, W]`).
    pub in_channels: usize,
    /// Channels of the output (one filter each).
    pub out_channels: usize,
    /// Window size `(kh, kw)`.
    pub kernel: (usize, usize),
    /// Step between windows `(sh, sw)`, at least 1.
    pub stride: (usize, usize),
    /// Zeros added on each side `(ph, pw)`.
    pub padding: (usize, usize),
    /// Spacing between the window's taps `(dh, dw)`; 1 is a dense window.
    pub dilation: (usize, usize),
    /// Channel groups: each output channel sees `in_channels / groups` inputs; both channel counts
    /// must divide by it.
    pub groups: usize,
    /// Whether a bias `[out_channels]` is added.
    pub bias: bool,
}

impl Conv2dConfig {
    /// PyTorch's defaults around the required sizes: stride 1, no padding, dilation 1, one
    /// group, with bias.
    pub fn new(in_channels: usize, out_channels: usize, kernel: (usize, usize)) -> Self {
        Conv2dConfig {
            in_channels,
            out_channels,
            kernel,
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
            bias: true,
        }
    }
}

/// Shows `(a, a)` as `a`, like PyTorch's int-or-tuple arguments.
pub(crate) fn pair(p: (usize, usize)) -> String {
    if p.0 == p.1 {
        p.0.to_string()
    } else {
        format!("({}, {})", p.0, p.1)
    }
}

/// `Conv2d(in => out, kernel)`: weight `[out, in/groups, kh, kw]`, bias `[out]` (PyTorch names).
pub struct Conv2d {
    /// Filters `[out_channels, in_channels/groups, kh, kw]`.
    pub weight: Param,
    /// One bias per output channel, `[out_channels]`, if the layer has one.
    pub bias: Option<Param>,
    config: Conv2dConfig,
}

impl Conv2d {
    /// PyTorch's default init: weight and bias uniform in `±1/sqrt(fan_in)` with
    /// `fan_in = in/groups · kh · kw` (kaiming-uniform with `a = √5`).
    pub fn new(device: &Device, cfg: Conv2dConfig, seed: u64) -> Result<Self> {
        let (kh, kw) = cfg.kernel;
        let positive = [cfg.in_channels, cfg.out_channels, kh, kw, cfg.stride.0, cfg.stride.1]
            .into_iter()
            .chain([cfg.dilation.0, cfg.dilation.1, cfg.groups])
            .all(|v| v > 0);
        if !positive {
            return Err(Error::invalid("Conv2d", format!("sizes in {cfg:?} must be positive")));
        }
        if !cfg.in_channels.is_multiple_of(cfg.groups) || !cfg.out_channels.is_multiple_of(cfg.groups) {
            return Err(Error::invalid(
                "Conv2d",
                format!(
                    "in_channels {} and out_channels {} must be divisible by groups {}",
                    cfg.in_channels, cfg.out_channels, cfg.groups
                ),
            ));
        }
        let group_channels = cfg.in_channels / cfg.groups;
        let fan_in = group_channels * kh * kw;
        let (weight, bias) = init::conv_parameters(
            device,
            &[cfg.out_channels, group_channels, kh, kw],
            fan_in,
            cfg.out_channels,
            cfg.bias,
            seed,
        )?;
        Ok(Conv2d { weight, bias, config: cfg })
    }

    /// The hyper-parameters the layer was built with.
    pub fn config(&self) -> &Conv2dConfig {
        &self.config
    }
}

impl Module for Conv2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let c = &self.config;
        x.conv2d(
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
        let mut s = format!("Conv2d({} => {}, kernel = {}", c.in_channels, c.out_channels, pair(c.kernel));
        if c.stride != (1, 1) {
            s += &format!(", stride = {}", pair(c.stride));
        }
        if c.padding != (0, 0) {
            s += &format!(", padding = {}", pair(c.padding));
        }
        if c.dilation != (1, 1) {
            s += &format!(", dilation = {}", pair(c.dilation));
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
