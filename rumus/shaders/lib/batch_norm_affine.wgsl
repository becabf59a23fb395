// The forward map of a batch norm's channel c, y = (x - mean) * scale + shift, as (mean, scale,
// shift): batch_norm.wgsl writes y with it, and batch_norm_backward.wgsl recomputes y with it
// for the ReLU's mask (one function, so both agree on every sign). Reads the includer's p
// (lib/batch_norm_params.wgsl), mean, variance, weight and bias.

fn forward_affine(c: u32) -> vec3<f32> {
    var scale = 1.0 / sqrt(variance[c] + p.eps);
    if p.has_weight == 1u {
        scale *= weight[c];
    }
    var shift = 0.0;
    if p.has_bias == 1u {
        shift = bias[c];
    }
    return vec3<f32>(mean[c], scale, shift);
}
