// LSTM over whole sequences (PyTorch's gates i, f, g, o): per step, each invocation computes
// the four pre-activations of its hidden units (projection + b_hh + W_hh·h_prev), the gates,
// c and h. The outputs go to the packed result [batch, steps + 2, hidden] (h at every time step,
// then h_n and c_n), the gates and c to saved [batch, steps, 5·hidden] for the backward.

@group(0) @binding(1) var<storage, read> xproj: array<f32>;
@group(0) @binding(2) var<storage, read> w_t: array<f32>;
@group(0) @binding(3) var<storage, read> b_hh: array<f32>;
@group(0) @binding(4) var<storage, read> h0: array<f32>;
@group(0) @binding(5) var<storage, read> c0: array<f32>;
@group(0) @binding(6) var<storage, read_write> packed: array<f32>;
@group(0) @binding(7) var<storage, read_write> saved: array<f32>;

@compute @workgroup_size(RNN_WG)
fn lstm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let h = p.hidden;
    let width = 4u * h;
    let t_len = p.steps;
    for (var b = wid.x; b < p.batch; b += nwg.x) {
        let out_base = b * (t_len + 2u) * h;
        for (var s = 0u; s < t_len; s++) {
            let t = time_of(s);
            let first = s == 0u;
            // The previous step's row; on the first step, where h0 is read instead, the h_n row
            // (written after the last step only), so no invocation reads a row being written.
            let prev = out_base + select(time_of(max(s, 1u) - 1u), t_len, first) * h;
            let x_base = (b * t_len + t) * width;
            let s_base = (b * t_len + t) * 5u * h;
            for (var j = lid; j < h; j += RNN_WG) {
                var acc = vec4<f32>(b_hh[j], b_hh[h + j], b_hh[2u * h + j], b_hh[3u * h + j]);
                for (var k = 0u; k < h; k++) {
                    let hk = select(packed[prev + k], h0[b * h + k], first);
                    let w = k * width + j;
                    acc += hk * vec4<f32>(w_t[w], w_t[w + h], w_t[w + 2u * h], w_t[w + 3u * h]);
                }
                let i = sigmoid(xproj[x_base + j] + acc.x);
                let f = sigmoid(xproj[x_base + h + j] + acc.y);
                let g = stable_tanh(xproj[x_base + 2u * h + j] + acc.z);
                let o = sigmoid(xproj[x_base + 3u * h + j] + acc.w);
                let c_prev = select(saved[(b * t_len + time_of(max(s, 1u) - 1u)) * 5u * h + 4u * h + j],
                                    c0[b * h + j], first);
                let c = f * c_prev + i * g;
                packed[out_base + t * h + j] = o * stable_tanh(c);
                saved[s_base + j] = i;
                saved[s_base + h + j] = f;
                saved[s_base + 2u * h + j] = g;
                saved[s_base + 3u * h + j] = o;
                saved[s_base + 4u * h + j] = c;
            }
            storageBarrier();
        }
        let last = time_of(t_len - 1u);
        for (var j = lid; j < h; j += RNN_WG) {
            packed[out_base + t_len * h + j] = packed[out_base + last * h + j];
            packed[out_base + (t_len + 1u) * h + j] = saved[(b * t_len + last) * 5u * h + 4u * h + j];
        }
    }
}
