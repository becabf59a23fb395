//! The parameters of `lib/window.wgsl`, shared by every kernel over 2-D sliding windows:
//! `im2col.wgsl`, `col2im.wgsl`, `pooling.wgsl`, `conv2d.wgsl` and `conv2d_direct.wgsl`.

use super::params::kernel_params;
use crate::backend::ConvGeom;

kernel_params! {
    /// `n` invocations over the window geometry; the fields from `out_channels` on are
    /// `conv2d.wgsl`'s (zero for the others; from `tap_step_h` on, the input gradient's stride
    /// phases: up to two along each axis per dispatch).
    struct WindowParams {
        n: u32,
        batch: u32,
        channels: u32,
        in_h: u32,
        in_w: u32,
        kernel_h: u32,
        kernel_w: u32,
        stride_h: u32,
        stride_w: u32,
        pad_h: u32,
        pad_w: u32,
        dilation_h: u32,
        dilation_w: u32,
        out_h: u32,
        out_w: u32,
        adaptive: u32,
        neg_inf: f32,
        out_channels: u32,
        groups: u32,
        has_bias: u32,
        split_len: u32,
        tap_step_h: u32,
        tap_step_w: u32,
        phases_w: u32,
        phase_axes: [[u32; 4]; 4],
    }
}

impl WindowParams {
    /// The window of `g` for `n` invocations (`adaptive`: windows of adaptive average pooling).
    pub(super) fn of(g: &ConvGeom, n: usize, adaptive: bool) -> WindowParams {
        WindowParams {
            n: n as u32,
            batch: g.batch as u32,
            channels: g.channels as u32,
            in_h: g.in_h as u32,
            in_w: g.in_w as u32,
            kernel_h: g.kernel_h as u32,
            kernel_w: g.kernel_w as u32,
            stride_h: g.stride_h as u32,
            stride_w: g.stride_w as u32,
            pad_h: g.pad_h as u32,
            pad_w: g.pad_w as u32,
            dilation_h: g.dilation_h as u32,
            dilation_w: g.dilation_w as u32,
            out_h: g.out_h as u32,
            out_w: g.out_w as u32,
            adaptive: adaptive as u32,
            neg_inf: f32::NEG_INFINITY,
            out_channels: 0,
            groups: 0,
            has_bias: 0,
            split_len: 0,
            tap_step_h: 0,
            tap_step_w: 0,
            phases_w: 0,
            phase_axes: [[0; 4]; 4],
        }
    }
}
