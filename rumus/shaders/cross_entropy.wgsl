// Cross-entropy of logits rows against u32 class targets with label smoothing s:
// loss_r = (1-s)·(lse - x[t]) + s·(lse - mean(x)), computed relative to the row max as the CPU
// does; gradient g_r·(softmax(x) - q) with q = (1-s)·onehot(t) + s/C.
// Workgroup-per-row entry points walk rows with a grid stride (any row count); the `_short`
// ones use one invocation per row for few classes. Needs a reduction prelude (wg_sum, wg_max)
// and lib/row_max_sum.wgsl.
// A target >= classes is never followed: its row's position goes to `bad` as
// atomicMax(0xffffffff - row) (0: none), which the backend reads back when the host cannot vouch
// for the targets (backend/wgpu/index_check.rs); the row's output is then meaningless.

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
@group(0) @binding(5) var<storage, read_write> bad: array<atomic<u32>>;

// The row's target, reported when out of range (then any class in range stands in for it).
fn target_of(row: u32) -> u32 {
    let t = targets[row];
    if t >= p.classes {
        atomicMax(&bad[0], 0xffffffffu - row);
        return 0u;
    }
    return t;
}

// Loss of one row from its max m, sum(exp(x - m)) s and sum(m - x) gaps. Summing the gaps to the
// maximum (each in [0, spread]) instead of the raw logits keeps the smoothing term exact at any
// logit size.
fn row_loss(row: u32, m: f32, s: f32, gaps: f32) -> f32 {
    let log_sum = log(s);
    let t = target_of(row);
    let nll = (m - x[row * p.classes + t]) + log_sum;
    let mean_nll = gaps / f32(p.classes) + log_sum;
    return select(nll, (1.0 - p.smoothing) * nll + p.smoothing * mean_nll, p.smoothing > 0.0);
}

fn grad_at(row: u32, j: u32, m: f32, inv_sum: f32) -> f32 {
    let q = p.smoothing / f32(p.classes) + select(0.0, 1.0 - p.smoothing, j == targets[row]);
    return grad_rows[row] * (exp(x[row * p.classes + j] - m) * inv_sum - q);
}

fn row_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid;
}

@compute @workgroup_size(RED_WG)
fn cross_entropy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.classes;
        let ms = row_max_sum(base, p.classes, lid);
        var acc = 0.0;
        for (var j = lid; j < p.classes; j += RED_WG) {
            acc += ms.x - x[base + j];
        }
        let gaps = wg_sum(acc, lid);
        if lid == 0u {
            out[row] = row_loss(row, ms.x, ms.y, gaps);
        }
    }
}

@compute @workgroup_size(256)
fn cross_entropy_short(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let row = row_id(wid, nwg, lid);
    if row >= p.rows {
        return;
    }
    let base = row * p.classes;
    var m = p.neg_inf;
    for (var j = 0u; j < p.classes; j++) {
        m = max(m, x[base + j]);
    }
    var s = 0.0;
    var gaps = 0.0;
    for (var j = 0u; j < p.classes; j++) {
        s += exp(x[base + j] - m);
        gaps += m - x[base + j];
    }
    out[row] = row_loss(row, m, s, gaps);
}

@compute @workgroup_size(RED_WG)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.classes;
        let ms = row_max_sum(base, p.classes, lid);
        let inv_sum = 1.0 / ms.y;
        if lid == 0u {
            _ = target_of(row);
        }
        for (var j = lid; j < p.classes; j += RED_WG) {
            out[base + j] = grad_at(row, j, ms.x, inv_sum);
        }
    }
}

@compute @workgroup_size(256)
fn cross_entropy_backward_short(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                                @builtin(local_invocation_index) lid: u32) {
    let row = row_id(wid, nwg, lid);
    if row >= p.rows {
        return;
    }
    let base = row * p.classes;
    var m = p.neg_inf;
    for (var j = 0u; j < p.classes; j++) {
        m = max(m, x[base + j]);
    }
    var s = 0.0;
    for (var j = 0u; j < p.classes; j++) {
        s += exp(x[base + j] - m);
    }
    let inv_sum = 1.0 / s;
    _ = target_of(row);
    for (var j = 0u; j < p.classes; j++) {
        out[base + j] = grad_at(row, j, m, inv_sum);
    }
}
