// Softmax / log-softmax over rows of the last axis, numerically stable (computed relative to the
// row max, as the CPU does; the workgroup path reads each row twice, not three times). Two entry
// points:
// `softmax`: one RED_WG-wide workgroup per row, rows walked with a grid stride (any row count).
// `softmax_short`: one invocation per row, for short rows where a workgroup would idle.
// Needs a reduction prelude (wg_sum, wg_max) and lib/row_max_sum.wgsl.

struct Params {
    rows: u32,
    cols: u32,
    log: u32,
    neg_inf: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

fn finish(v: f32, m: f32, log_sum: f32, inv_sum: f32) -> f32 {
    return select(exp(v - m) * inv_sum, (v - m) - log_sum, p.log == 1u);
}

@compute @workgroup_size(RED_WG)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        let ms = row_max_sum(base, p.cols, lid);
        let m = ms.x;
        let s = ms.y;
        let log_sum = log(s);
        let inv_sum = 1.0 / s;
        for (var j = lid; j < p.cols; j += RED_WG) {
            out[base + j] = finish(x[base + j], m, log_sum, inv_sum);
        }
    }
}

@compute @workgroup_size(256)
fn softmax_short(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 256u + lid;
    if row >= p.rows {
        return;
    }
    let base = row * p.cols;
    var m = p.neg_inf;
    for (var j = 0u; j < p.cols; j++) {
        m = max(m, x[base + j]);
    }
    var s = 0.0;
    for (var j = 0u; j < p.cols; j++) {
        s += exp(x[base + j] - m);
    }
    let log_sum = log(s);
    let inv_sum = 1.0 / s;
    for (var j = 0u; j < p.cols; j++) {
        out[base + j] = finish(x[base + j], m, log_sum, inv_sum);
    }
}
