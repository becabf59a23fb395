//! Pooling layers over NCHW input.

use super::conv::pair;
use super::{Module, Param};
use crate::{RawTensor, Result};

/// Max pooling. Arguments are checked when the layer runs (the macro checks them at compile
/// time for declared models).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2d {
    /// Window size `(kh, kw)`.
    pub kernel: (usize, usize),
    /// Step between windows `(sh, sw)`.
    pub stride: (usize, usize),
    /// Implicit −∞ border on each side `(ph, pw)`, at most half the window.
    pub padding: (usize, usize),
    /// Spacing between the window's taps `(dh, dw)`; 1 is a dense window.
    pub dilation: (usize, usize),
}

impl MaxPool2d {
    /// Arguments are checked when the layer runs (the macro checks them at compile time).
    pub fn new(
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Self {
        MaxPool2d { kernel, stride, padding, dilation }
    }
}

impl Module for MaxPool2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.max_pool2d(self.kernel, self.stride, self.padding, self.dilation)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        let mut s = format!("MaxPool2d(kernel = {}", pair(self.kernel));
        if self.stride != self.kernel {
            s += &format!(", stride = {}", pair(self.stride));
        }
        if self.padding != (0, 0) {
            s += &format!(", padding = {}", pair(self.padding));
        }
        if self.dilation != (1, 1) {
            s += &format!(", dilation = {}", pair(self.dilation));
        }
        s + ")"
    }
}

/// Average pooling; padding counts in the divisor (PyTorch's default `count_include_pad`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2d {
    /// Window size `(kh, kw)`.
    pub kernel: (usize, usize),
    /// Step between windows `(sh, sw)`.
    pub stride: (usize, usize),
    /// Zeros added on each side `(ph, pw)`, counted in the divisor.
    pub padding: (usize, usize),
}

impl AvgPool2d {
    /// Arguments are checked when the layer runs (the macro checks them at compile time).
    pub fn new(kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize)) -> Self {
        AvgPool2d { kernel, stride, padding }
    }
}

impl Module for AvgPool2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.avg_pool2d(self.kernel, self.stride, self.padding)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        let mut s = format!("AvgPool2d(kernel = {}", pair(self.kernel));
        if self.stride != self.kernel {
            s += &format!(", stride = {}", pair(self.stride));
        }
        if self.padding != (0, 0) {
            s += &format!(", padding = {}", pair(self.padding));
        }
        s + ")"
    }
}

/// Average pooling to a fixed output size, whatever the input size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool2d {
    /// Output size `(oh, ow)`.
    pub output: (usize, usize),
}

impl AdaptiveAvgPool2d {
    /// Pools any `[N, C, H, W]` to `[N, C, oh, ow]`.
    pub fn new(output: (usize, usize)) -> Self {
        AdaptiveAvgPool2d { output }
    }
}

impl Module for AdaptiveAvgPool2d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.adaptive_avg_pool2d(self.output)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        format!("AdaptiveAvgPool2d({})", pair(self.output))
    }
}

/// 1-D max pooling over `[n, c, l]`; arguments are checked when the layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool1d {
    /// Window length.
    pub kernel: usize,
    /// Step between windows.
    pub stride: usize,
    /// Padding on each side (−∞ for max pooling, zeros counted in the average).
    pub padding: usize,
    /// Spacing between the window's taps; 1 is a dense window.
    pub dilation: usize,
}

impl MaxPool1d {
    /// Max pooling with these sizes (PyTorch's `MaxPool1d(kernel, stride, padding, dilation)`).
    pub fn new(kernel: usize, stride: usize, padding: usize, dilation: usize) -> Self {
        MaxPool1d { kernel, stride, padding, dilation }
    }
}

impl Module for MaxPool1d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.max_pool1d(self.kernel, self.stride, self.padding, self.dilation)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        let mut s = format!("MaxPool1d(kernel = {}", self.kernel);
        if self.stride != self.kernel {
            s += &format!(", stride = {}", self.stride);
        }
        if self.padding != 0 {
            s += &format!(", padding = {}", self.padding);
        }
        if self.dilation != 1 {
            s += &format!(", dilation = {}", self.dilation);
        }
        s + ")"
    }
}

/// 1-D average pooling over `[n, c, l]`; padding counts in the divisor (PyTorch's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool1d {
    /// Window length.
    pub kernel: usize,
    /// Step between windows.
    pub stride: usize,
    /// Padding on each side (−∞ for max pooling, zeros counted in the average).
    pub padding: usize,
}

impl AvgPool1d {
    /// Average pooling with these sizes (PyTorch's `AvgPool1d(kernel, stride, padding)`).
    pub fn new(kernel: usize, stride: usize, padding: usize) -> Self {
        AvgPool1d { kernel, stride, padding }
    }
}

impl Module for AvgPool1d {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.avg_pool1d(self.kernel, self.stride, self.padding)
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        let mut s = format!("AvgPool1d(kernel = {}", self.kernel);
        if self.stride != self.kernel {
            s += &format!(", stride = {}", self.stride);
        }
        if self.padding != 0 {
            s += &format!(", padding = {}", self.padding);
        }
        s + ")"
    }
}
