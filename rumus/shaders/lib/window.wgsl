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
    // conv2d.wgsl's input gradient only: its stride phases (see conv2d.wgsl). The taps' step
    // along each axis, and how many column phases the dispatch holds: workgroup z runs row phase
    // z / phases_w and column phase z % phases_w, each axis phase (first input row or column,
    // rows or columns, first tap, taps) from `phase_axes`: row phases at 0 and 1, column phases
    // at 2 and 3.
    tap_step_h: u32,
    tap_step_w: u32,
    phases_w: u32,
    phase_axes: array<vec4<u32>, 4>,
}

@group(0) @binding(0) var<uniform> p: Params;
