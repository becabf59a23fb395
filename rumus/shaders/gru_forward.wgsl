// GRU over whole sequences (PyTorch's gates r, z, n): per step, each invocation computes the
// recurrent terms W_h·h_prev + b_hh of its hidden units, then r = σ(x_r + ·), z = σ(x_z + ·),
// n = tanh(x_n + r ⊙ (W_hn h + b_hn)) and h = (1 - z) ⊙ n + z ⊙ h_prev. The outputs go to the
// packed result [batch, steps + 1, hidden] (h at every time step, then h_n), r, z, n and
// W_hn h + b_hn to saved [batch, steps, 4·hidden] for the backward.

@group(0) @binding(1) var<storage, read> xproj: array<f32>;
@group(0) @binding(2) var<storage, read> w_t: array<f32>;
@group(0) @binding(3) var<storage, read> b_hh: array<f32>;
@group(0) @binding(4) var<storage, read> h0: array<f32>;
@group(0) @binding(5) var<storage, read_write> packed: array<f32>;
@group(0) @binding(6) var<storage, read_write> saved: array<f32>;

@compute @workgroup_size(RNN_WG)
fn gru_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let h = p.hidden;
    let width = 3u * h;
    let t_len = p.steps;
    for (var b = wid.x; b < p.batch; b += nwg.x) {
        let out_base = b * (t_len + 1u) * h;
        for (var s = 0u; s < t_len; s++) {
            let t = time_of(s);
            let first = s == 0u;
            // The previous step's row; on the first step, where h0 is read instead, the h_n row
            // (written after the last step only), so no invocation reads a row being written.
            let prev = out_base + select(time_of(max(s, 1u) - 1u), t_len, first) * h;
            let x_base = (b * t_len + t) * width;
            let s_base = (b * t_len + t) * 4u * h;
            for (var j = lid; j < h; j += RNN_WG) {
                var acc = vec3<f32>(b_hh[j], b_hh[h + j], b_hh[2u * h + j]);
                for (var k = 0u; k < h; k++) {
                    let hk = select(packed[prev + k], h0[b * h + k], first);
                    let w = k * width + j;
                    acc += hk * vec3<f32>(w_t[w], w_t[w + h], w_t[w + 2u * h]);
                }
                let r = sigmoid(xproj[x_base + j] + acc.x);
                let z = sigmoid(xproj[x_base + h + j] + acc.y);
                let n = stable_tanh(xproj[x_base + 2u * h + j] + r * acc.z);
                let h_prev = select(packed[prev + j], h0[b * h + j], first);
                packed[out_base + t * h + j] = (1.0 - z) * n + z * h_prev;
                saved[s_base + j] = r;
                saved[s_base + h + j] = z;
                saved[s_base + 2u * h + j] = n;
                saved[s_base + 3u * h + j] = acc.z;
            }
            storageBarrier();
        }
        let last = time_of(t_len - 1u);
        for (var j = lid; j < h; j += RNN_WG) {
            packed[out_base + t_len * h + j] = packed[out_base + last * h + j];
        }
    }
}
