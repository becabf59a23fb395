// Sum / max / min over the middle axis of [outer, len, inner] (`op` is one of the
// OP_SUM / OP_MAX / OP_MIN constants placed before this file by backend/wgpu/reduce.rs).
// `reduce_rows` (inner == 1, long rows): one workgroup per (row, chunk), grid-stride over them,
//   so any row count works. A long row is split into `chunks` pieces whose partials a second
//   dispatch combines, so a single huge row still spreads over the whole GPU.
// `reduce_cols` (inner > 1, or short rows): one invocation per output, reading coalesced across
//   `inner`, eight rows in flight at a time; with few outputs the reduced axis is split into
//   chunks the same way.
// `sum_squares`: one tensor's sum of squares as partials, into a buffer several tensors share.
// Needs a reduction prelude (wg_sum, wg_max).

struct Params {
    // reduce_rows: rows to produce (outer * chunks); reduce_cols: outer; sum_squares: the first
    // partial it writes
    outer: u32,
    len: u32,
    inner: u32,
    op: u32,
    identity: f32,
    // sum_squares: its workgroups
    chunks: u32,
    chunk_len: u32,
    // Passed in because WGSL constant expressions cannot be NaN.
    nan: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
// The input as 16-byte elements, for reduce_rows4 alone.
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;

// NaN test on the bits: drivers may compile `v != v` under fast-math rules and fold it to false.
fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// As the CPU: NaN wins in max/min.
fn combine(op: u32, acc: f32, v: f32) -> f32 {
    switch op {
        case OP_SUM: { return acc + v; }
        case OP_MAX: { return select(acc, v, v > acc || is_nan(v)); }
        default: { return select(acc, v, v < acc || is_nan(v)); }
    }
}

@compute @workgroup_size(RED_WG)
fn reduce_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.outer; row += groups) {
        let o = row / p.chunks;
        let c = row % p.chunks;
        let base = o * p.len;
        let start = c * p.chunk_len;
        let end = min(p.len, start + p.chunk_len);
        var acc = p.identity;
        for (var j = start + lid; j < end; j += RED_WG) {
            acc = combine(p.op, acc, x[base + j]);
        }
        let r = reduce_group(acc, lid);
        if lid == 0u {
            out[row] = r;
        }
    }
}

// The workgroup's reduction of each invocation's `acc`, as the CPU rules (NaN wins in max/min).
fn reduce_group(acc: f32, lid: u32) -> f32 {
    if p.op == OP_SUM {
        return wg_sum(acc, lid);
    }
    // Hardware max/min may drop NaN; the CPU's rule is that NaN wins, so count them.
    let nans = wg_sum(select(0.0, 1.0, is_nan(acc)), lid);
    var r: f32;
    if p.op == OP_MAX {
        r = wg_max(acc, lid);
    } else {
        r = -wg_max(-acc, lid);
    }
    return select(r, p.nan, nans > 0.0);
}

@compute @workgroup_size(RED_WG)
fn reduce_rows4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.outer; row += groups) {
        let o = row / p.chunks;
        let c = row % p.chunks;
        // In quads: len and chunk_len are multiples of 4.
        let base = o * (p.len / 4u);
        let start = c * (p.chunk_len / 4u);
        let end = min(p.len / 4u, start + p.chunk_len / 4u);
        var acc = vec4<f32>(p.identity);
        for (var j = start + lid; j < end; j += RED_WG) {
            let v = x4[base + j];
            acc = vec4<f32>(combine(p.op, acc.x, v.x), combine(p.op, acc.y, v.y), combine(p.op, acc.z, v.z),
                            combine(p.op, acc.w, v.w));
        }
        let folded = combine(p.op, combine(p.op, combine(p.op, acc.x, acc.y), acc.z), acc.w);
        let r = reduce_group(folded, lid);
        if lid == 0u {
            out[row] = r;
        }
    }
}

@compute @workgroup_size(256)
fn reduce_cols(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    // Output [outer, chunks, inner]: chunk c of the reduced axis for each kept element.
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.outer * p.chunks * p.inner {
        return;
    }
    let k = i % p.inner;
    let c = (i / p.inner) % p.chunks;
    let o = i / (p.inner * p.chunks);
    let base = o * p.len * p.inner + k;
    let end = min(p.len, (c + 1u) * p.chunk_len);
    var acc = p.identity;
    var j = c * p.chunk_len;
    // Eight rows a step, all loaded before they are combined (in order): with one load in flight
    // at a time, a walk down a column waited on memory latency at every row.
    let s = p.inner;
    for (; j + 8u <= end; j += 8u) {
        let at = base + j * s;
        let v0 = x[at];
        let v1 = x[at + s];
        let v2 = x[at + 2u * s];
        let v3 = x[at + 3u * s];
        let v4 = x[at + 4u * s];
        let v5 = x[at + 5u * s];
        let v6 = x[at + 6u * s];
        let v7 = x[at + 7u * s];
        acc = combine(p.op, combine(p.op, combine(p.op, combine(p.op, acc, v0), v1), v2), v3);
        acc = combine(p.op, combine(p.op, combine(p.op, combine(p.op, acc, v4), v5), v6), v7);
    }
    for (; j < end; j++) {
        acc = combine(p.op, acc, x[base + j * p.inner]);
    }
    out[i] = acc;
}

// Squares summed: workgroup g of the `chunks` sums x[j]² over j = g·RED_WG + lid + m·chunks·RED_WG
// below `len`, two elements in flight per step, into out[outer + g] (one tensor's partials in a
// buffer several tensors share; a reduction over all of them follows).
@compute @workgroup_size(RED_WG)
fn sum_squares(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let stride = p.chunks * RED_WG;
    var a0 = 0.0;
    var a1 = 0.0;
    var j = wid.x * RED_WG + lid;
    for (; j + stride < p.len; j += 2u * stride) {
        let v0 = x[j];
        let v1 = x[j + stride];
        a0 = fma(v0, v0, a0);
        a1 = fma(v1, v1, a1);
    }
    if j < p.len {
        let v = x[j];
        a0 = fma(v, v, a0);
    }
    let r = wg_sum(a0 + a1, lid);
    if lid == 0u {
        out[p.outer + wid.x] = r;
    }
}
