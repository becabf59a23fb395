// Batch normalisation of x [batch, channels, inner] per channel (statistics over batch and
// inner, `count` = batch * inner values each), forward. Three entry points:
//   batch_norm_partials: workgroup (k, c) sums the values of channel c that chunk k takes
//     (every chunks * RED_WG-th, starting at k * RED_WG + lid), shifted by the channel's first
//     value x[0, c, 0] (no cancellation when the mean is large against the spread), and writes
//     the shifted sum and sum of squares to partials[c * chunks + k] and
//     partials[(channels + c) * chunks + k]; batch_norm_partials4 the same where inner % 4 == 0,
//     four adjacent values at a time;
//   batch_norm_stats: one workgroup per channel adds its chunks' partials (at most RED_WG, one
//     per invocation, in a fixed order: a deterministic result) and writes the mean and the
//     biased variance;
//   batch_norm_apply (one value per invocation) and batch_norm_apply4 (four, inner % 4 == 0):
//     y = (x - mean) * weight / sqrt(var + eps) + bias per channel (weight, bias optional),
//     max(y, 0) with p.relu (a ReLU fused into the same pass).
// The running statistics' update is batch_norm_running.wgsl.
// Needs a reduction prelude (wg_sum, RED_WG). Mirrors rumus/src/backend/cpu/batch_norm.rs.

// struct Params: lib/batch_norm_params.wgsl; forward_affine: lib/batch_norm_affine.wgsl.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> mean: array<f32>;
@group(0) @binding(5) var<storage, read_write> variance: array<f32>;
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(RED_WG)
fn batch_norm_partials(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    // The values of a channel are runs of `inner` at a stride of channels * inner; walking them
    // `stride` at a time adds (q runs, r values) to the position, with no division per value.
    let stride = p.chunks * RED_WG;
    let q = stride / p.inner;
    let r = stride % p.inner;
    let plane = p.channels * p.inner;
    let first = wid.x * RED_WG + lid;
    for (var c = wid.y; c < p.channels; c += nwg.y) {
        let shift = x[c * p.inner];
        var n = first / p.inner;
        var i = first % p.inner;
        var s = 0.0;
        var sq = 0.0;
        for (var j = first; j < p.count; j += stride) {
            let d = x[n * plane + c * p.inner + i] - shift;
            s += d;
            sq += d * d;
            i += r;
            n += q;
            if i >= p.inner {
                i -= p.inner;
                n += 1u;
            }
        }
        let total = wg_sum(s, lid);
        let total_sq = wg_sum(sq, lid);
        if lid == 0u {
            partials[c * p.chunks + wid.x] = total;
            partials[(p.channels + c) * p.chunks + wid.x] = total_sq;
        }
    }
}

@compute @workgroup_size(RED_WG)
fn batch_norm_partials4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    // inner % 4 == 0: as batch_norm_partials, four adjacent values of one run at a time (four
    // loads in flight per invocation).
    let stride = p.chunks * RED_WG * 4u;
    let q = stride / p.inner;
    let r = stride % p.inner;
    let plane = p.channels * p.inner;
    let first = (wid.x * RED_WG + lid) * 4u;
    for (var c = wid.y; c < p.channels; c += nwg.y) {
        let shift = x[c * p.inner];
        var n = first / p.inner;
        var i = first % p.inner;
        var s = vec4<f32>();
        var sq = vec4<f32>();
        for (var j = first; j < p.count; j += stride) {
            let at = n * plane + c * p.inner + i;
            let d = vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]) - shift;
            s += d;
            sq += d * d;
            i += r;
            n += q;
            if i >= p.inner {
                i -= p.inner;
                n += 1u;
            }
        }
        let total = wg_sum(s.x + s.y + s.z + s.w, lid);
        let total_sq = wg_sum(sq.x + sq.y + sq.z + sq.w, lid);
        if lid == 0u {
            partials[c * p.chunks + wid.x] = total;
            partials[(p.channels + c) * p.chunks + wid.x] = total_sq;
        }
    }
}

@compute @workgroup_size(RED_WG)
fn batch_norm_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    // One workgroup per channel, one chunk's partials per invocation (chunks <= RED_WG).
    let n = f32(p.count);
    for (var c = wid.x; c < p.channels; c += nwg.x) {
        var s = 0.0;
        var sq = 0.0;
        if lid < p.chunks {
            s = partials[c * p.chunks + lid];
            sq = partials[(p.channels + c) * p.chunks + lid];
        }
        let total = wg_sum(s, lid);
        let total_sq = wg_sum(sq, lid);
        if lid == 0u {
            let d = total / n;
            mean[c] = x[c * p.inner] + d;
            variance[c] = max(total_sq / n - d * d, 0.0);
        }
    }
}

@compute @workgroup_size(256)
fn batch_norm_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.count * p.channels {
        return;
    }
    let k = forward_affine((i / p.inner) % p.channels);
    var v = (x[i] - k.x) * k.y + k.z;
    if p.relu == 1u {
        v = max(v, 0.0);
    }
    y[i] = v;
}

@compute @workgroup_size(256)
fn batch_norm_apply4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.count * p.channels / 4u {
        return;
    }
    // inner % 4 == 0: the four values share a channel.
    let at = i * 4u;
    let k = forward_affine(at / p.inner % p.channels);
    var v = (vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]) - k.x) * k.y + k.z;
    if p.relu == 1u {
        v = max(v, vec4<f32>());
    }
    y[at] = v.x;
    y[at + 1u] = v.y;
    y[at + 2u] = v.z;
    y[at + 3u] = v.w;
}
