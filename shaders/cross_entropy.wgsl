// Cross-entropy of logits rows against u32 class targets with label smoothing s:
// loss_r = (1-s)·(lse - x[t]) + s·(lse - mean(x)); gradient g_r·(softmax(x) - q) with
// q = (1-s)·onehot(t) + s/C. One workgroup per row, grid-stride over rows.
// Needs a reduction prelude (wg_sum, wg_max).

struct Params {
    rows: u32,
    classes: u32,
    smoothing: f32,
    neg_inf: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read> grad_rows: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

// log(sum(exp(row))) for the row starting at `base`, identical in every invocation.
fn row_lse(base: u32, lid: u32) -> f32 {
    var m = p.neg_inf;
    for (var j = lid; j < p.classes; j += 256u) {
        m = max(m, x[base + j]);
    }
    m = wg_max(m, lid);
    var s = 0.0;
    for (var j = lid; j < p.classes; j += 256u) {
        s += exp(x[base + j] - m);
    }
    s = wg_sum(s, lid);
    return select(m + log(s), m, m == p.neg_inf);
}

@compute @workgroup_size(256)
fn cross_entropy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.classes;
        let lse = row_lse(base, lid);
        var acc = 0.0;
        for (var j = lid; j < p.classes; j += 256u) {
            acc += x[base + j];
        }
        let total = wg_sum(acc, lid);
        if lid == 0u {
            // Targets were range-checked by the op; min() only keeps a bad one in bounds.
            let t = min(targets[row], p.classes - 1u);
            let nll = lse - x[base + t];
            let mean_nll = lse - total / f32(p.classes);
            out[row] = select(nll, (1.0 - p.smoothing) * nll + p.smoothing * mean_nll, p.smoothing > 0.0);
        }
    }
}

@compute @workgroup_size(256)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    let uniform_q = p.smoothing / f32(p.classes);
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.classes;
        let lse = row_lse(base, lid);
        let gr = grad_rows[row];
        let t = targets[row];
        for (var j = lid; j < p.classes; j += 256u) {
            let q = uniform_q + select(0.0, 1.0 - p.smoothing, j == t);
            out[base + j] = gr * (exp(x[base + j] - lse) - q);
        }
    }
}
