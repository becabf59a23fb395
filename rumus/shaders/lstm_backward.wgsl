// Backpropagation through time of lstm_forward.wgsl, from the last processing step to the
// first. Per step, each invocation turns the gradients of its units' h and c into those of the
// four pre-activations (written to dgates [batch, steps, 4·hidden], the input projection's
// gradient) and c's gradient one step back; after a storage barrier, it carries h's gradient one
// step back through W_hh: dh[j] = Σ_g dgates[g]·W_hh[g, j]. dh and dc hold the running
// gradients and end as those of h0 and c0.

@group(0) @binding(1) var<storage, read> dpacked: array<f32>;
@group(0) @binding(2) var<storage, read> saved: array<f32>;
@group(0) @binding(3) var<storage, read> w_hh: array<f32>;
@group(0) @binding(4) var<storage, read> c0: array<f32>;
@group(0) @binding(5) var<storage, read_write> dgates: array<f32>;
@group(0) @binding(6) var<storage, read_write> dh: array<f32>;
@group(0) @binding(7) var<storage, read_write> dc: array<f32>;

@compute @workgroup_size(RNN_WG)
fn lstm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let h = p.hidden;
    let width = 4u * h;
    let t_len = p.steps;
    for (var b = wid.x; b < p.batch; b += nwg.x) {
        let out_base = b * (t_len + 2u) * h;
        for (var j = lid; j < h; j += RNN_WG) {
            dh[b * h + j] = dpacked[out_base + t_len * h + j];
            dc[b * h + j] = dpacked[out_base + (t_len + 1u) * h + j];
        }
        for (var r = 0u; r < t_len; r++) {
            let s = t_len - 1u - r;
            let t = time_of(s);
            let first = s == 0u;
            let s_base = (b * t_len + t) * 5u * h;
            let prev_c = (b * t_len + time_of(max(s, 1u) - 1u)) * 5u * h + 4u * h;
            let g_base = (b * t_len + t) * width;
            for (var j = lid; j < h; j += RNN_WG) {
                let i = saved[s_base + j];
                let f = saved[s_base + h + j];
                let g = saved[s_base + 2u * h + j];
                let o = saved[s_base + 3u * h + j];
                let tc = stable_tanh(saved[s_base + 4u * h + j]);
                let c_prev = select(saved[prev_c + j], c0[b * h + j], first);
                let dht = dh[b * h + j] + dpacked[out_base + t * h + j];
                let dct = dc[b * h + j] + dht * o * (1.0 - tc * tc);
                dgates[g_base + j] = dct * g * i * (1.0 - i);
                dgates[g_base + h + j] = dct * c_prev * f * (1.0 - f);
                dgates[g_base + 2u * h + j] = dct * i * (1.0 - g * g);
                dgates[g_base + 3u * h + j] = dht * tc * o * (1.0 - o);
                dc[b * h + j] = dct * f;
            }
            storageBarrier();
            for (var j = lid; j < h; j += RNN_WG) {
                var acc = 0.0;
                for (var g = 0u; g < width; g++) {
                    acc += dgates[g_base + g] * w_hh[g * h + j];
                }
                dh[b * h + j] = acc;
            }
            storageBarrier();
        }
    }
}
