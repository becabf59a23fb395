// index_select / index_add and gather / scatter_add over [outer, len, inner] views.
//
// Indices are checked here: one >= len is never followed (its output is 0) and its position
// goes to `bad` as atomicMax(0xffffffff - position), so the word holds the first bad position
// and 0 means none. The backend reads it back when the host cannot vouch for the indices
// (backend/wgpu/index_check.rs).
//
// The adds are deterministic (no float atomics, the same bits every run, and the CPU's order):
// index_links threads the positions of each index value into a list in index order, and
// index_add has one invocation per output element walk its row's list; where few workgroups
// cover the output's rows, index_add_rows has each workgroup mark its row's positions and add
// them in order; for another small output, index_add_scan has each output element scan every
// index, in the same order; scatter_add has one invocation per output element walk its column
// of indices in order.

struct Params {
    // Invocations of this dispatch.
    n: u32,
    outer: u32,
    len: u32,
    inner: u32,
    count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> bad: array<atomic<u32>>;
// index_links/index_add only: `len` list heads, then `count` next links; a link is a position
// plus 1, 0 ends a list.
@group(0) @binding(5) var<storage, read_write> links: array<u32>;

fn report(position: u32) {
    atomicMax(&bad[0], 0xffffffffu - position);
}

// out [outer, count, inner] = src [outer, len, inner] at idx [count] along the middle axis.
@compute @workgroup_size(256)
fn index_select(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let j = (i / p.inner) % p.count;
    let o = i / (p.inner * p.count);
    let r = idx[j];
    if r >= p.len {
        report(j);
        out[i] = 0.0;
        return;
    }
    out[i] = src[(o * p.len + r) * p.inner + k];
}

var<workgroup> tile: array<u32, 256>;

// links (zeroed) gets, for each value r < len, the positions j with idx[j] == r as a list in
// increasing j, headed at links[r] and continued at links[len + j]. The W invocations of the
// dispatch (a few workgroups) split the values, invocation w owning those with r % W == w: each
// walks every index from the last to the first, 256 at a time staged in workgroup memory, and
// links the positions of its own values, so no two invocations write the same word.
@compute @workgroup_size(256)
fn index_links(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let owners = nwg.x * 256u;
    let me = wid.x * 256u + lid;
    let tiles = (p.count + 255u) / 256u;
    for (var step = 0u; step < tiles; step++) {
        let base = (tiles - 1u - step) * 256u;
        workgroupBarrier();
        var v = 0u;
        if base + lid < p.count {
            v = idx[base + lid];
        }
        tile[lid] = v;
        workgroupBarrier();
        for (var t = min(256u, p.count - base); t > 0u; t--) {
            let j = base + t - 1u;
            let r = tile[t - 1u];
            if r >= p.len {
                if me == 0u {
                    report(j);
                }
            } else if r % owners == me {
                links[p.len + j] = links[r];
                links[r] = j + 1u;
            }
        }
    }
}

// src is the gradient [outer, count, inner]; out [outer, len, inner], one invocation each, sums
// the gradient rows whose index is its row, in index order (after index_links).
@compute @workgroup_size(256)
fn index_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let r = (i / p.inner) % p.len;
    let o = i / (p.inner * p.len);
    var acc = 0.0;
    var link = links[r];
    // Each link points past the current position, so the walk ends within `count` steps.
    for (var steps = 0u; link != 0u && steps < p.count; steps++) {
        let j = link - 1u;
        acc += src[(o * p.count + j) * p.inner + k];
        link = links[p.len + j];
    }
    out[i] = acc;
}

// index_add without lists, for a small output: each invocation sums, in index order, the
// gradient rows whose index is its row, reading every index (staged 256 at a time in workgroup
// memory: every invocation reads the same ones). The same sums, in the same order, as
// index_links + index_add, without index_links' serial walk over the indices; invocation 0
// reports the first out-of-range index.
@compute @workgroup_size(256)
fn index_add_scan(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    let live = i < p.n;
    let k = i % p.inner;
    let r = (i / p.inner) % p.len;
    let o = i / (p.inner * p.len);
    var acc = 0.0;
    let tiles = (p.count + 255u) / 256u;
    for (var step = 0u; step < tiles; step++) {
        let base = step * 256u;
        workgroupBarrier();
        if base + lid < p.count {
            tile[lid] = idx[base + lid];
        }
        workgroupBarrier();
        if live {
            for (var t = 0u; t < min(256u, p.count - base); t++) {
                let x = tile[t];
                if x == r {
                    acc += src[(o * p.count + base + t) * p.inner + k];
                } else if x >= p.len && i == 0u {
                    report(base + t);
                }
            }
        }
    }
    if live {
        out[i] = acc;
    }
}

// index_add for outputs whose rows few workgroups cover (a GPT's token embedding: 16,384
// positions into 80 rows of 384): workgroup (o, r, block of 256 columns) marks, 256 indices at a
// time, the positions whose index is r as bits in workgroup memory (atomicOr, whose order does
// not matter), then each invocation adds those positions' gradient rows at its column in
// increasing position: the CPU's order, as index_add. The indices are read once per workgroup,
// not once per output element as in index_add_scan; workgroup 0 reports the first
// out-of-range index.
var<workgroup> hits: array<atomic<u32>, 8>;

@compute @workgroup_size(256)
fn index_add_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    let blocks = (p.inner + 255u) / 256u;
    // Workgroup-uniform: the extra workgroups of a two-dimensional dispatch leave before any barrier.
    if g >= p.outer * p.len * blocks {
        return;
    }
    let k = (g % blocks) * 256u + lid;
    let r = (g / blocks) % p.len;
    let o = g / (blocks * p.len);
    let live = k < p.inner;
    var acc = 0.0;
    let tiles = (p.count + 255u) / 256u;
    for (var step = 0u; step < tiles; step++) {
        let base = step * 256u;
        workgroupBarrier();
        if lid < 8u {
            atomicStore(&hits[lid], 0u);
        }
        workgroupBarrier();
        if base + lid < p.count {
            let x = idx[base + lid];
            if x == r {
                atomicOr(&hits[lid / 32u], 1u << (lid % 32u));
            } else if x >= p.len && g == 0u {
                report(base + lid);
            }
        }
        workgroupBarrier();
        if live {
            for (var w = 0u; w < 8u; w++) {
                var bits = atomicLoad(&hits[w]);
                while bits != 0u {
                    let t = base + w * 32u + countTrailingZeros(bits);
                    bits &= bits - 1u;
                    acc += src[(o * p.count + t) * p.inner + k];
                }
            }
        }
    }
    if live {
        out[(o * p.len + r) * p.inner + k] = acc;
    }
}

// out[o, j, k] = src[o, idx[o, j, k], k]; idx and out are [outer, count, inner].
@compute @workgroup_size(256)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let o = i / (p.inner * p.count);
    let r = idx[i];
    if r >= p.len {
        report(i);
        out[i] = 0.0;
        return;
    }
    out[i] = src[(o * p.len + r) * p.inner + k];
}

// Adjoint of gather: src is the gradient [outer, count, inner]; out [outer, len, inner], one
// invocation each, sums its column's gradients whose index is its row, in order along count.
@compute @workgroup_size(256)
fn scatter_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let r = (i / p.inner) % p.len;
    let o = i / (p.inner * p.len);
    var acc = 0.0;
    for (var j = 0u; j < p.count; j++) {
        let at = (o * p.count + j) * p.inner + k;
        let v = idx[at];
        if v == r {
            acc += src[at];
        } else if v >= p.len && r == 0u {
            report(at);
        }
    }
    out[i] = acc;
}
