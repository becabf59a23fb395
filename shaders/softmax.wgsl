// Softmax / log-softmax over rows of the last axis. One 256-wide workgroup per row, rows walked
// with a grid stride so any row count works; numerically stable (max subtracted first).
// Needs a reduction prelude (wg_sum, wg_max).

struct Params {
    rows: u32,
    cols: u32,
    log: u32,
    neg_inf: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        var m = p.neg_inf;
        for (var j = lid; j < p.cols; j += 256u) {
            m = max(m, x[base + j]);
        }
        m = wg_max(m, lid);
        var s = 0.0;
        for (var j = lid; j < p.cols; j += 256u) {
            s += exp(x[base + j] - m);
        }
        s = wg_sum(s, lid);
        // A row of -inf has lse -inf (and NaN outputs), as on the CPU.
        let lse = select(m + log(s), m, m == p.neg_inf);
        for (var j = lid; j < p.cols; j += 256u) {
            let v = x[base + j] - lse;
            out[base + j] = select(exp(v), v, p.log == 1u);
        }
    }
}
