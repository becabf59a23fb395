// Shared by im2col.wgsl, col2im.wgsl and pool.wgsl: the geometry of a 2-D sliding window over
// NCHW input (ConvGeom in rumus/src/backend/kernel_args.rs; `n` is the invocation count).

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
}

@group(0) @binding(0) var<uniform> p: Params;
