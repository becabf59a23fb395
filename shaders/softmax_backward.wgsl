// Gradient of softmax / log-softmax over rows, from the forward output y and the incoming grad:
// softmax: dx = y * (g - sum(g*y)); log-softmax: dx = g - exp(y) * sum(g).
// Needs a reduction prelude (wg_sum).

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

@compute @workgroup_size(256)
fn softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    let log_form = p.log == 1u;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        var acc = 0.0;
        for (var j = lid; j < p.cols; j += 256u) {
            acc += select(g[base + j] * y[base + j], g[base + j], log_form);
        }
        let total = wg_sum(acc, lid);
        for (var j = lid; j < p.cols; j += 256u) {
            let gv = g[base + j];
            let yv = y[base + j];
            out[base + j] = select(yv * (gv - total), gv - exp(yv) * total, log_form);
        }
    }
}
