// Layer normalisation of each row of x [rows, cols]: y = (x - mean) * rstd * weight + bias, with
// rstd = 1 / sqrt(var + eps) (biased variance); weight and bias [cols] are optional (has_weight,
// has_bias); each row's mean and rstd are written for the backward (layer_norm_backward.wgsl).
// One RED_WG-wide workgroup per row, rows walked with a grid stride. Needs a reduction prelude.

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
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd_out: array<f32>;

@compute @workgroup_size(RED_WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    let n = f32(p.cols);
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        var s = 0.0;
        for (var j = lid; j < p.cols; j += RED_WG) {
            s += x[base + j];
        }
        let mean = wg_sum(s, lid) / n;
        var v = 0.0;
        for (var j = lid; j < p.cols; j += RED_WG) {
            let c = x[base + j] - mean;
            v += c * c;
        }
        let rstd = 1.0 / sqrt(wg_sum(v, lid) / n + p.eps);
        for (var j = lid; j < p.cols; j += RED_WG) {
            var out = (x[base + j] - mean) * rstd;
            if p.has_weight == 1u {
                out *= weight[j];
            }
            if p.has_bias == 1u {
                out += bias[j];
            }
            y[base + j] = out;
        }
        if lid == 0u {
            mean_out[row] = mean;
            rstd_out[row] = rstd;
        }
    }
}
