// Cross-entropy of logits rows against u32 class targets, with label smoothing s, optional class
// weights w (all ones unless the flag OP_WEIGHTED is set) and an ignored target value (flag
// OP_IGNORE; both constants injected by the backend):
// loss_r = (1-s)·w[t]·(lse - x[t]) + (s/C)·Σ_j w[j]·(lse - x[j]), computed relative to the row
// max as the CPU does; with weights or an ignored value the forward also writes the row's
// weight w[t] at out[rows + r] (the divisor of the mean). Gradient g_r·(A·softmax(x) - q) with A = (1-s)·w[t] + (s/C)·Σw
// and q_j = (1-s)·w[t]·[j = t] + (s/C)·w[j]. An ignored row has loss, weight and gradient 0.
// Workgroup-per-row entry points walk rows with a grid stride (any row count); the `_short`
// ones use one invocation per row for few classes. Needs a reduction prelude (wg_sum, wg_max)
// and lib/row_max_sum.wgsl.
// A target >= classes that is not the ignored value is never followed: its row's position goes
// to `bad` as atomicMax(0xffffffff - row) (0: none), which the backend reads back when the host
// cannot vouch for the targets (backend/wgpu/index_check.rs); the row's output is then
// meaningless.

struct Params {
    rows: u32,
    classes: u32,
    smoothing: f32,
    neg_inf: f32,
    ignore_index: u32,
    flags: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read> grad_rows: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> bad: array<atomic<u32>>;

fn ignored(row: u32) -> bool {
    return (p.flags & OP_IGNORE) != 0u && targets[row] == p.ignore_index;
}

// The row's target, reported when out of range and not ignored (then any class in range stands
// in for it).
fn target_of(row: u32) -> u32 {
    let t = targets[row];
    if t >= p.classes {
        if !ignored(row) {
            atomicMax(&bad[0], 0xffffffffu - row);
        }
        return 0u;
    }
    return t;
}

fn weight(j: u32) -> f32 {
    if (p.flags & OP_WEIGHTED) != 0u {
        return weights[j];
    }
    return 1.0;
}

// Loss of one row from its max m, sum(exp(x - m)) s, weighted gaps Σ w·(m - x) and Σ w. Summing
// the gaps to the maximum (each in [0, spread]) instead of the raw logits keeps the smoothing
// term exact at any logit size. Writes the loss and the row's weight.
fn write_row(row: u32, m: f32, s: f32, gaps: f32, total: f32) {
    let log_sum = log(s);
    let t = target_of(row);
    let wt = weight(t);
    let nll = wt * ((m - x[row * p.classes + t]) + log_sum);
    let smoothed = p.smoothing / f32(p.classes) * (gaps + total * log_sum);
    let loss = select(nll, (1.0 - p.smoothing) * nll + smoothed, p.smoothing > 0.0);
    let skip = ignored(row);
    out[row] = select(loss, 0.0, skip);
    if p.flags != 0u {
        out[p.rows + row] = select(wt, 0.0, skip);
    }
}

fn grad_at(row: u32, j: u32, m: f32, inv_sum: f32, total: f32) -> f32 {
    let t = targets[row];
    let wt = (1.0 - p.smoothing) * weight(min(t, p.classes - 1u));
    let a = wt + p.smoothing / f32(p.classes) * total;
    let q = p.smoothing / f32(p.classes) * weight(j) + select(0.0, wt, j == t);
    return select(grad_rows[row] * (a * exp(x[row * p.classes + j] - m) * inv_sum - q), 0.0, ignored(row));
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
        var tot = 0.0;
        for (var j = lid; j < p.classes; j += RED_WG) {
            let w = weight(j);
            acc += w * (ms.x - x[base + j]);
            tot += w;
        }
        let gaps = wg_sum(acc, lid);
        let total = wg_sum(tot, lid);
        if lid == 0u {
            write_row(row, ms.x, ms.y, gaps, total);
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
    var total = 0.0;
    for (var j = 0u; j < p.classes; j++) {
        let w = weight(j);
        s += exp(x[base + j] - m);
        gaps += w * (m - x[base + j]);
        total += w;
    }
    write_row(row, m, s, gaps, total);
}

@compute @workgroup_size(RED_WG)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.classes;
        let ms = row_max_sum(base, p.classes, lid);
        let inv_sum = 1.0 / ms.y;
        var tot = 0.0;
        for (var j = lid; j < p.classes; j += RED_WG) {
            tot += weight(j);
        }
        let total = wg_sum(tot, lid);
        if lid == 0u {
            _ = target_of(row);
        }
        for (var j = lid; j < p.classes; j += RED_WG) {
            out[base + j] = grad_at(row, j, ms.x, inv_sum, total);
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
    var total = 0.0;
    for (var j = 0u; j < p.classes; j++) {
        s += exp(x[base + j] - m);
        total += weight(j);
    }
    let inv_sum = 1.0 / s;
    _ = target_of(row);
    for (var j = 0u; j < p.classes; j++) {
        out[base + j] = grad_at(row, j, m, inv_sum, total);
    }
}
