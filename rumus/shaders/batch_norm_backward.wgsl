// The gradients of batch_norm.wgsl given dy, the statistics the forward used (mean, biased
// variance) and rstd = 1 / sqrt(var + eps). Three entry points:
//   batch_norm_backward_partials: workgroup (k, c) sums dy and dy * (x - mean) over the values
//     of channel c that chunk k takes (as batch_norm_partials walks them) into
//     partials[c * chunks + k] and partials[(channels + c) * chunks + k];
//     batch_norm_backward_partials4 the same where inner % 4 == 0, four adjacent values at a time;
//   batch_norm_backward_stats: one workgroup per channel adds its chunks' partials (at most
//     RED_WG, in a fixed order) into dbias = sum(dy) and dweight = sum(dy * xhat), xhat = (x - mean) * rstd, written after
//     the partials: partials[tail + c] and partials[tail + channels + c], tail = 2 * channels *
//     chunks (WebGPU's default limits allow 8 storage buffers: the launcher copies them out);
//   batch_norm_backward_apply (one value per invocation) and batch_norm_backward_apply4 (four,
//     inner % 4 == 0): dx = k * dy + kx * (x - mean) + k0 with k = weight * rstd and, with
//     batch statistics, kx = -k * rstd * dweight / count and k0 = -k * dbias / count (0 without:
//     the running statistics are constants).
// With p.relu (the forward fused a ReLU) every pass reads dy as the ReLU's gradient: dy where
// the forward's y = (x - mean) * scale + shift (forward_affine, recomputed from x, which every
// pass reads anyway: no saved output) is positive, else 0.
// Needs a reduction prelude (wg_sum, RED_WG). Mirrors rumus/src/backend/cpu/batch_norm.rs.

// struct Params: lib/batch_norm_params.wgsl; forward_affine: lib/batch_norm_affine.wgsl.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> mean: array<f32>;
@group(0) @binding(4) var<storage, read> variance: array<f32>;
@group(0) @binding(5) var<storage, read> dy: array<f32>;
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;
@group(0) @binding(7) var<storage, read_write> dx: array<f32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

// The fused ReLU's gradient: g where the forward's output at x, by channel map k
// (forward_affine), was positive, else 0 (read only with p.relu).
fn relu_grad(g: f32, x: f32, k: vec3<f32>) -> f32 {
    return select(0.0, g, (x - k.x) * k.y + k.z > 0.0);
}

fn relu_grad4(g: vec4<f32>, x: vec4<f32>, k: vec3<f32>) -> vec4<f32> {
    return select(vec4<f32>(), g, (x - k.x) * k.y + k.z > vec4<f32>());
}

// Where dbias (then dweight) follow the partials.
fn tail() -> u32 {
    return 2u * p.channels * p.chunks;
}

@compute @workgroup_size(RED_WG)
fn batch_norm_backward_partials(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                                @builtin(local_invocation_index) lid: u32) {
    let stride = p.chunks * RED_WG;
    let q = stride / p.inner;
    let r = stride % p.inner;
    let plane = p.channels * p.inner;
    let first = wid.x * RED_WG + lid;
    for (var c = wid.y; c < p.channels; c += nwg.y) {
        let mu = mean[c];
        let k = forward_affine(c);
        var n = first / p.inner;
        var i = first % p.inner;
        var s = 0.0;
        var sx = 0.0;
        for (var j = first; j < p.count; j += stride) {
            let at = n * plane + c * p.inner + i;
            let v = x[at];
            var g = dy[at];
            if p.relu == 1u {
                g = relu_grad(g, v, k);
            }
            s += g;
            sx += g * (v - mu);
            i += r;
            n += q;
            if i >= p.inner {
                i -= p.inner;
                n += 1u;
            }
        }
        let total = wg_sum(s, lid);
        let total_x = wg_sum(sx, lid);
        if lid == 0u {
            partials[c * p.chunks + wid.x] = total;
            partials[(p.channels + c) * p.chunks + wid.x] = total_x;
        }
    }
}

@compute @workgroup_size(RED_WG)
fn batch_norm_backward_partials4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                                 @builtin(local_invocation_index) lid: u32) {
    // inner % 4 == 0: four adjacent values of one run at a time.
    let stride = p.chunks * RED_WG * 4u;
    let q = stride / p.inner;
    let r = stride % p.inner;
    let plane = p.channels * p.inner;
    let first = (wid.x * RED_WG + lid) * 4u;
    for (var c = wid.y; c < p.channels; c += nwg.y) {
        let mu = mean[c];
        let k = forward_affine(c);
        var n = first / p.inner;
        var i = first % p.inner;
        var s = vec4<f32>();
        var sx = vec4<f32>();
        for (var j = first; j < p.count; j += stride) {
            let at = n * plane + c * p.inner + i;
            let v = vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]);
            var g = vec4<f32>(dy[at], dy[at + 1u], dy[at + 2u], dy[at + 3u]);
            if p.relu == 1u {
                g = relu_grad4(g, v, k);
            }
            s += g;
            sx += g * (v - mu);
            i += r;
            n += q;
            if i >= p.inner {
                i -= p.inner;
                n += 1u;
            }
        }
        let total = wg_sum(s.x + s.y + s.z + s.w, lid);
        let total_x = wg_sum(sx.x + sx.y + sx.z + sx.w, lid);
        if lid == 0u {
            partials[c * p.chunks + wid.x] = total;
            partials[(p.channels + c) * p.chunks + wid.x] = total_x;
        }
    }
}

fn rstd(c: u32) -> f32 {
    return 1.0 / sqrt(variance[c] + p.eps);
}

@compute @workgroup_size(RED_WG)
fn batch_norm_backward_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) lid: u32) {
    // One workgroup per channel, one chunk's partials per invocation (chunks <= RED_WG).
    for (var c = wid.x; c < p.channels; c += nwg.x) {
        var s = 0.0;
        var sx = 0.0;
        if lid < p.chunks {
            s = partials[c * p.chunks + lid];
            sx = partials[(p.channels + c) * p.chunks + lid];
        }
        let total = wg_sum(s, lid);
        let total_x = wg_sum(sx, lid);
        if lid == 0u {
            partials[tail() + c] = total;
            partials[tail() + p.channels + c] = total_x * rstd(c);
        }
    }
}

// (mean, k, kx, k0) of channel c: dx = k * dy + kx * (x - mean) + k0.
fn coefficients(c: u32) -> vec4<f32> {
    let inv = rstd(c);
    var k = inv;
    if p.has_weight == 1u {
        k *= weight[c];
    }
    if p.batch_stats == 0u {
        return vec4<f32>(mean[c], k, 0.0, 0.0);
    }
    let m = f32(p.count);
    let dbias = partials[tail() + c];
    let dweight = partials[tail() + p.channels + c];
    return vec4<f32>(mean[c], k, -k * inv * dweight / m, -k * dbias / m);
}

@compute @workgroup_size(256)
fn batch_norm_backward_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.count * p.channels {
        return;
    }
    let c = (i / p.inner) % p.channels;
    let k = coefficients(c);
    let v = x[i];
    var g = dy[i];
    if p.relu == 1u {
        g = relu_grad(g, v, forward_affine(c));
    }
    dx[i] = k.y * g + k.z * (v - k.x) + k.w;
}

@compute @workgroup_size(256)
fn batch_norm_backward_apply4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.count * p.channels / 4u {
        return;
    }
    // inner % 4 == 0: the four values share a channel.
    let at = i * 4u;
    let c = at / p.inner % p.channels;
    let k = coefficients(c);
    let v = vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]);
    var g = vec4<f32>(dy[at], dy[at + 1u], dy[at + 2u], dy[at + 3u]);
    if p.relu == 1u {
        g = relu_grad4(g, v, forward_affine(c));
    }
    let d = k.y * g + k.z * (v - k.x) + k.w;
    dx[at] = d.x;
    dx[at + 1u] = d.y;
    dx[at + 2u] = d.z;
    dx[at + 3u] = d.w;
}
