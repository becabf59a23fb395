// The uniform parameters of the batch norm kernels (batch_norm.wgsl, batch_norm_backward.wgsl,
// batch_norm_running.wgsl): BatchNormParams in rumus/src/backend/wgpu/batch_norm.rs.

struct Params {
    batch: u32,
    channels: u32,
    inner: u32,
    count: u32,
    chunks: u32,
    eps: f32,
    has_weight: u32,
    has_bias: u32,
    batch_stats: u32,
    momentum: f32,
    unbiased: f32,
    relu: u32,
}
