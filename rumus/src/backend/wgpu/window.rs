//! The parameters of `lib/window.wgsl`, shared by every kernel over 2-D sliding windows:
//! `im2col.wgsl`, `col2im.wgsl`, `pooling.wgsl`, `conv2d.wgsl` and `conv2d_direct.wgsl`.

use super::params::kernel_params;
use crate::backend::ConvGeom;

kernel_params! {
    /// `n` invocations over the window geometry; the last fourteen fields are `conv2d.wgsl`'s
    /// (zero for the others; the last ten, the input gradient's stride phase).
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
        phase_h: u32,
        phase_w: u32,
        sub_h: u32,
        sub_w: u32,
        tap_h: u32,
        tap_w: u32,
        taps_h: u32,
        taps_w: u32,
        tap_step_h: u32,
        tap_step_w: u32,
    } pad 1
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
            phase_h: 0,
            phase_w: 0,
            sub_h: 0,
            sub_w: 0,
            tap_h: 0,
            tap_w: 0,
            taps_h: 0,
            taps_w: 0,
            tap_step_h: 0,
            tap_step_w: 0,
            _pad: [0; 1],
        }
    }
}
