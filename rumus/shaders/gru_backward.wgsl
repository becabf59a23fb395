// Backpropagation through time of gru_forward.wgsl, from the last processing step to the
// first. Per step, each invocation turns the gradient of its units' h into those of the
// pre-activations on the input side (dgx [batch, steps, 3·hidden]) and on the recurrent side
// (dgh, the same but n's scaled by r), and keeps z ⊙ dh; after a storage barrier it adds the
// path through W_hh: dh[j] += Σ_g dgh[g]·W_hh[g, j]. dh ends as h0's gradient.

@group(0) @binding(1) var<storage, read> dpacked: array<f32>;
@group(0) @binding(2) var<storage, read> saved: array<f32>;
@group(0) @binding(3) var<storage, read> packed: array<f32>;
@group(0) @binding(4) var<storage, read> w_hh: array<f32>;
@group(0) @binding(5) var<storage, read> h0: array<f32>;
@group(0) @binding(6) var<storage, read_write> dgx: array<f32>;
@group(0) @binding(7) var<storage, read_write> dgh: array<f32>;
@group(0) @binding(8) var<storage, read_write> dh: array<f32>;

@compute @workgroup_size(RNN_WG)
fn gru_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let h = p.hidden;
    let width = 3u * h;
    let t_len = p.steps;
    for (var b = wid.x; b < p.batch; b += nwg.x) {
        let out_base = b * (t_len + 1u) * h;
        for (var j = lid; j < h; j += RNN_WG) {
            dh[b * h + j] = dpacked[out_base + t_len * h + j];
        }
        for (var r = 0u; r < t_len; r++) {
            let s = t_len - 1u - r;
            let t = time_of(s);
            let first = s == 0u;
            let s_base = (b * t_len + t) * 4u * h;
            let prev = out_base + time_of(max(s, 1u) - 1u) * h;
            let g_base = (b * t_len + t) * width;
            for (var j = lid; j < h; j += RNN_WG) {
                let rg = saved[s_base + j];
                let z = saved[s_base + h + j];
                let n = saved[s_base + 2u * h + j];
                let hn = saved[s_base + 3u * h + j];
                let h_prev = select(packed[prev + j], h0[b * h + j], first);
                let dht = dh[b * h + j] + dpacked[out_base + t * h + j];
                let dn = dht * (1.0 - z) * (1.0 - n * n);
                let dr = dn * hn * rg * (1.0 - rg);
                let dz = dht * (h_prev - n) * z * (1.0 - z);
                dgx[g_base + j] = dr;
                dgx[g_base + h + j] = dz;
                dgx[g_base + 2u * h + j] = dn;
                dgh[g_base + j] = dr;
                dgh[g_base + h + j] = dz;
                dgh[g_base + 2u * h + j] = dn * rg;
                dh[b * h + j] = dht * z;
            }
            storageBarrier();
            for (var j = lid; j < h; j += RNN_WG) {
                var acc = dh[b * h + j];
                for (var g = 0u; g < width; g++) {
                    acc += dgh[g_base + g] * w_hh[g * h + j];
                }
                dh[b * h + j] = acc;
            }
            storageBarrier();
        }
    }
}
