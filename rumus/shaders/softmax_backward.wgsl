// Gradient of softmax / log-softmax over rows, from the forward output y and the incoming grad:
// softmax: dx = y * (g - sum(g*y)); log-softmax: dx = g - exp(y) * sum(g).
// `softmax_backward`: one workgroup per row (grid stride); `softmax_backward_short`: one
// invocation per short row. Needs a reduction prelude (wg_sum).

struct Params {
    rows: u32,
    cols: u32,
    log: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn term(i: u32) -> f32 {
    return select(g[i] * y[i], g[i], p.log == 1u);
}

fn finish(i: u32, total: f32) -> f32 {
    return select(y[i] * (g[i] - total), g[i] - exp(y[i]) * total, p.log == 1u);
}

@compute @workgroup_size(RED_WG)
fn softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        var acc = 0.0;
        for (var j = lid; j < p.cols; j += RED_WG) {
            acc += term(base + j);
        }
        let total = wg_sum(acc, lid);
        for (var j = lid; j < p.cols; j += RED_WG) {
            out[base + j] = finish(base + j, total);
        }
    }
}

@compute @workgroup_size(256)
fn softmax_backward_short(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 256u + lid;
    if row >= p.rows {
        return;
    }
    let base = row * p.cols;
    var total = 0.0;
    for (var j = 0u; j < p.cols; j++) {
        total += term(base + j);
    }
    for (var j = 0u; j < p.cols; j++) {
        out[base + j] = finish(base + j, total);
    }
}
