// Index of the first largest element along the middle axis of [outer, len, inner]; NaN counts
// as largest, as on the CPU. One invocation per output.

struct Params {
    outer: u32,
    len: u32,
    inner: u32,
    neg_inf: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

// NaN test on the bits: drivers may compile `v != v` under fast-math rules and fold it to false.
fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.outer * p.inner {
        return;
    }
    let o = i / p.inner;
    let k = i % p.inner;
    let base = o * p.len * p.inner + k;
    var best = p.neg_inf;
    var best_at = 0u;
    for (var j = 0u; j < p.len; j++) {
        let v = x[base + j * p.inner];
        if v > best || (is_nan(v) && !is_nan(best)) {
            best = v;
            best_at = j;
        }
    }
    out[i] = best_at;
}
