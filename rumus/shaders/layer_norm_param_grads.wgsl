// The weight and bias gradients of layer_norm.wgsl: dweight[j] = Σ_rows dy·x̂ and
// dbias[j] = Σ_rows dy, x̂ = (x - mean)·rstd. Invocation (c, j) sums the rows of chunk c
// (c·chunk_len .. (c+1)·chunk_len) of column j, four rows' loads in flight at a time and added in
// order, into pw[c·cols + j] and pb[c·cols + j]; a column reduction over the chunks follows
// (backend/wgpu/layer_norm.rs).

struct Params {
    rows: u32,
    cols: u32,
    chunks: u32,
    chunk_len: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> mean_in: array<f32>;
@group(0) @binding(3) var<storage, read> rstd_in: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> pw: array<f32>;
@group(0) @binding(6) var<storage, read_write> pb: array<f32>;

// dy·x̂ and dy of row r, column j.
fn terms(r: u32, j: u32) -> vec2<f32> {
    let at = r * p.cols + j;
    let g = dy[at];
    return vec2<f32>(g * ((x[at] - mean_in[r]) * rstd_in[r]), g);
}

@compute @workgroup_size(256)
fn layer_norm_param_grads(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.chunks * p.cols {
        return;
    }
    let j = i % p.cols;
    let c = i / p.cols;
    let end = min(p.rows, (c + 1u) * p.chunk_len);
    var acc = vec2<f32>(0.0);
    var r = c * p.chunk_len;
    for (; r + 4u <= end; r += 4u) {
        let t0 = terms(r, j);
        let t1 = terms(r + 1u, j);
        let t2 = terms(r + 2u, j);
        let t3 = terms(r + 3u, j);
        acc = (((acc + t0) + t1) + t2) + t3;
    }
    for (; r < end; r++) {
        acc += terms(r, j);
    }
    pw[i] = acc.x;
    pb[i] = acc.y;
}
