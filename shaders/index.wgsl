// index_select / index_add and gather / scatter_add over [outer, len, inner] views.
// Indices were range-checked by the op layer. The adds scatter with a compare-and-swap loop on
// the f32 bits (portable: no float-atomics feature needed) into a zeroed output, so the output
// is declared as atomic words in every entry point; the selects store plain bits.

struct Params {
    n: u32,
    outer: u32,
    len: u32,
    inner: u32,
    count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<atomic<u32>>;

fn add_at(i: u32, v: f32) {
    var old = atomicLoad(&out[i]);
    loop {
        let r = atomicCompareExchangeWeak(&out[i], old, bitcast<u32>(bitcast<f32>(old) + v));
        if r.exchanged {
            break;
        }
        old = r.old_value;
    }
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
    atomicStore(&out[i], bitcast<u32>(src[(o * p.len + idx[j]) * p.inner + k]));
}

// src is the gradient [outer, count, inner]; out [outer, len, inner] starts zeroed.
@compute @workgroup_size(256)
fn index_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let j = (i / p.inner) % p.count;
    let o = i / (p.inner * p.count);
    add_at((o * p.len + idx[j]) * p.inner + k, src[i]);
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
    atomicStore(&out[i], bitcast<u32>(src[(o * p.len + idx[i]) * p.inner + k]));
}

// Adjoint of gather: src is the gradient [outer, count, inner]; out starts zeroed.
@compute @workgroup_size(256)
fn scatter_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let k = i % p.inner;
    let o = i / (p.inner * p.count);
    add_at((o * p.len + idx[i]) * p.inner + k, src[i]);
}
