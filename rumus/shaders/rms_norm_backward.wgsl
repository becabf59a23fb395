// The input gradient of rms_norm.wgsl: per row, with g = dy * weight (dy without a weight) and
// xhat = x * rstd, dx = rstd * (g - xhat * mean(g * xhat)). One RED_WG-wide workgroup per row,
// rows walked with a grid stride. Needs a reduction prelude.

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
@group(0) @binding(3) var<storage, read> rstd_in: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

fn scaled_grad(i: u32, j: u32) -> f32 {
    return select(dy[i], dy[i] * weight[j], p.has_weight == 1u);
}

@compute @workgroup_size(RED_WG)
fn rms_norm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let groups = nwg.x * nwg.y;
    let n = f32(p.cols);
    for (var row = wid.x + wid.y * nwg.x; row < p.rows; row += groups) {
        let base = row * p.cols;
        let rstd = rstd_in[row];
        var sgx = 0.0;
        for (var j = lid; j < p.cols; j += RED_WG) {
            sgx += scaled_grad(base + j, j) * x[base + j] * rstd;
        }
        let mean_gx = wg_sum(sgx, lid) / n;
        for (var j = lid; j < p.cols; j += RED_WG) {
            let xhat = x[base + j] * rstd;
            dx[base + j] = rstd * (scaled_grad(base + j, j) - xhat * mean_gx);
        }
    }
}
