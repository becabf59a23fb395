// The staged tiles of the one-row-per-invocation attention kernels (attention_forward.wgsl,
// attention_backward_dq.wgsl, attention_backward_dkdv.wgsl): two tiles of BT x DMAX floats,
// 16 KiB together, within WebGPU's default workgroup memory. Needs lib/attention_tiles.wgsl.

var<workgroup> tile_a: array<vec4<f32>, BT * D4>;
var<workgroup> tile_b: array<vec4<f32>, BT * D4>;

// Stages keys j0 .. j0 + BT of head b: k into tile_a and v into tile_b (zeros past tk).
fn stage_kv(b: u32, j0: u32, lid: u32) {
    let kb = p.k_off + k_head_start(b);
    let vb = p.v_off + v_head_start(b);
    for (var e = lid; e < BT * D4; e += WG) {
        let j = j0 + e / D4;
        var kk = vec4<f32>(0.0);
        var vv = vec4<f32>(0.0);
        if j < p.tk {
            kk = load_k(kb + j * p.k_row, e % D4);
            vv = load_v(vb + j * p.v_row, e % D4);
        }
        tile_a[e] = kk;
        tile_b[e] = vv;
    }
}

