//! Transposed 2-D convolution layer.

use super::conv::pair;
use super::module::visit_weight_and_bias;
use super::{init, Module, Param};
use crate::{ConvTranspose2dArgs, Device, Error, RawTensor, Result};

/// Hyper-parameters of [`ConvTranspose2d`], each pair `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dConfig {
    /// Channels of the input (C in `[N, C, H, W]`).
    pub in_channels: usize,
    /// Channels of the output.
    pub out_channels: usize,
    /// Window size `(kh, kw)`.
    pub kernel: (usize, usize),
    /// Step between the input positions' windows in the output `(sh, sw)`, at least 1.
    pub stride: (usize, usize),
    /// Rows/columns removed from each side of the full output `(ph, pw)`.
    pub padding: (usize, usize),
    /// Extra rows/columns on the bottom/right of the output; smaller than the stride.
    pub output_padding: (usize, usize),
    /// Spacing between the window's taps `(dh, dw)`; 1 is a dense window.
    pub dilation: (usize, usize),
    /// Channel groups: each output channel sees `in_channels / groups` inputs; both channel counts must divide by it.
    pub groups: usize,
    /// Whether a bias `[out_channels]` is added.
    pub bias: bool,
}

impl ConvTranspose2dConfig {
    /// PyTorch's defaults around the required sizes: stride 1, no padding, no output padding,
    /// dilation 1, one group, with bias.
    pub fn new(in_channels: usize, out_channels: usize, kernel: (usize, usize)) -> Self {
        ConvTranspose2dConfig {
            in_channels,
            out_channels,
            kernel,
            stride: (1, 1),
            padding: (0, 0),
            output_padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
            bias: true,
        }
    }

    fn args(&self) -> ConvTranspose2dArgs {
        ConvTranspose2dArgs {
            stride: self.stride,
            padding: self.padding,
            output_padding: self.output_padding,
            dilation: self.dilation,
            groups: self.groups,
        }
    }
}

/// `ConvTranspose2d(in => out, kernel)`: weight `[in, out/groups, kh, kw]`, bias `[out]`
/// (PyTorch's names and layout). `[n, in, h, w]` → `[n, out, H', W']` with
/// `H' = (h − 1)·s − 2p + d·(k − 1) + output_padding + 1`.
pub struct ConvTranspose2d {
    /// Filters `[in_channels, out_channels/groups, kh, kw]` (PyTorch's layout for a transposed convolution).
    pub weight: Param,
    /// One bias per output channel, `[out_channels]`, if the layer has one.
    pub bias: Option<Param>,
    config: ConvTranspose2dConfig,
}

impl ConvTranspose2d {
    /// PyTorch's default init: weight and bias uniform in `±1/sqrt(fan_in)`, where PyTorch
    /// takes `fan_in` from the weight's second axis: `out/groups · kh · kw`.
    pub fn new(device: &Device, cfg: ConvTranspose2dConfig, seed: u64) -> Result<Self> {
        const OP: &str = "ConvTranspose2d";
        let (kh, kw) = cfg.kernel;
        let positive = [cfg.in_channels, cfg.out_channels, kh, kw, cfg.stride.0, cfg.stride.1]
            .into_iter()
            .chain([cfg.dilation.0, cfg.dilation.1, cfg.groups])
            .all(|v| v > 0);
        if !positive {
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
        if cfg.output_padding.0 >= cfg.stride.0 || cfg.output_padding.1 >= cfg.stride.1 {
            return Err(Error::invalid(
                OP,
                format!("output_padding {:?} must be smaller than the stride {:?}", cfg.output_padding, cfg.stride),
            ));
        }
        let group_out = cfg.out_channels / cfg.groups;
        let fan_in = group_out * kh * kw;
        let (weight, bias) = init::conv_parameters(
            device,
            &[cfg.in_channels, group_out, kh, kw],
            fan_in,
            cfg.out_channels,
            cfg.bias,
            seed,
        )?;
        Ok(ConvTranspose2d { weight, bias, config: cfg })
    }

    /// The hyper-parameters this layer was built with.
    pub fn config(&self) -> &ConvTranspose2dConfig {
        &self.config
    }
}

impl Module for ConvTranspose2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.conv_transpose2d(self.weight.tensor(), self.bias.as_ref().map(|b| b.tensor()), self.config.args())
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        visit_weight_and_bias(prefix, &self.weight, self.bias.as_ref(), visitor);
    }

    fn describe(&self) -> String {
        let c = &self.config;
        let mut s = format!("ConvTranspose2d({} => {}, kernel = {}", c.in_channels, c.out_channels, pair(c.kernel));
        for (name, v, default) in [
            ("stride", c.stride, (1, 1)),
            ("padding", c.padding, (0, 0)),
            ("output_padding", c.output_padding, (0, 0)),
            ("dilation", c.dilation, (1, 1)),
        ] {
            if v != default {
                s += &format!(", {name} = {}", pair(v));
            }
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
