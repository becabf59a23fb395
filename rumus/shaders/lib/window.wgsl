// Shared by im2col.wgsl, col2im.wgsl, pooling.wgsl and conv2d.wgsl: the geometry of a 2-D sliding
// window over NCHW input (ConvGeom in rumus/src/backend/kernel_args.rs; `n` is the invocation
// count, unused by conv2d.wgsl).

struct Params {
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
    // conv2d.wgsl only (zero for the others): the weight's output channels and groups, whether
    // a bias is bound, and the reduction length per split of the weight gradient.
    out_channels: u32,
    groups: u32,
    has_bias: u32,
    split_len: u32,
    // conv2d.wgsl's input gradient only: the stride phase of the dispatch (its first input row
    // and column, rows and columns, first taps, tap counts and tap steps; see conv2d.wgsl).
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
}

@group(0) @binding(0) var<uniform> p: Params;
