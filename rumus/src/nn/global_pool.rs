//! Global pooling layers: one value per channel, `[n, c, h, w]` → `[n, c]`.

use super::{Module, Param};
use crate::{RawTensor, Result};

/// The mean of each channel's plane: `[C, H, W]` → `[C]` per sample (Keras's
/// `GlobalAveragePooling2D`; PyTorch's `AdaptiveAvgPool2d(1)` followed by `Flatten`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalAvgPool;

impl Module for GlobalAvgPool {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.global_avg_pool2d()
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        "GlobalAvgPool".into()
    }
}

/// The maximum of each channel's plane: `[C, H, W]` → `[C]` per sample (Keras's
/// `GlobalMaxPooling2D`; PyTorch's `AdaptiveMaxPool2d(1)` followed by `Flatten`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalMaxPool;

impl Module for GlobalMaxPool {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        x.global_max_pool2d()
    }
    fn visit_params(&self, _: &str, _: &mut dyn FnMut(&str, &Param)) {}
    fn describe(&self) -> String {
        "GlobalMaxPool".into()
    }
}
