// RMS normalisation of each row of x [rows, cols]: y = x * rstd * weight, with
// rstd = 1 / sqrt(mean(x^2) + eps); weight [cols] is optional (has_weight; has_bias is unused);
// each row's rstd is written for the backward (rms_norm_backward.wgsl). One RED_WG-wide
// workgroup per row, rows walked with a grid stride. Needs a reduction prelude.

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
    has_weight: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> rstd_out: array<f32>;

@compute @workgroup_size(RED_WG)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    let n = f32(p.cols);
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        var s = 0.0;
        for (var j = lid; j < p.cols; j += RED_WG) {
            let v = x[base + j];
            s += v * v;
        }
        let rstd = 1.0 / sqrt(wg_sum(s, lid) / n + p.eps);
        for (var j = lid; j < p.cols; j += RED_WG) {
            var out = x[base + j] * rstd;
            if p.has_weight == 1u {
                out *= weight[j];
            }
            y[base + j] = out;
        }
        if lid == 0u {
            rstd_out[row] = rstd;
        }
    }
}
