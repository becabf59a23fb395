// Fused attention forward (FlashAttention style): one workgroup per (head, WG queries), one
// invocation per query holding its query row and output row in registers. Keys and values are
// staged BT at a time in workgroup memory and folded into an online softmax; the scores never
// leave registers. Tiles of keys no query of the workgroup sees (causal) are skipped.
// Writes out [batch, tq, d] and lse [batch, tq], each query's log-sum-exp of its scaled scores
// (natural log), for the backward. Needs lib/attention_tiles.wgsl and its constants.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;

@compute @workgroup_size(WG)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    if wid.x + wid.y * nwg.x >= p.total {
        return;
    }
    let origin = tile_origin(wid, nwg);
    let b = origin.x;
    let i = origin.y + lid;
    let live = i < p.tq;
    let row = b * p.tq + i;
    var qr: array<vec4<f32>, D4>;
    var o: array<vec4<f32>, D4>;
    if live {
        for (var c = 0u; c < D4; c++) {
            qr[c] = load_q(row, c) * p.scale_log2;
        }
    }
    var m = NEG_BIG;
    var l = 0.0;
    let end = keys_seen(min(origin.y + WG, p.tq) - 1u);
    let mine = select(0u, keys_seen(i), live);
    for (var j0 = 0u; j0 < end; j0 += BT) {
        workgroupBarrier();
        stage_kv(b, j0, lid);
        workgroupBarrier();
        let n = min(BT, max(mine, j0) - j0);
        var s: array<f32, BT>;
        var mt = m;
        for (var j = 0u; j < BT; j++) {
            if j < n {
                var acc = vec4<f32>(0.0);
                for (var c = 0u; c < D4; c++) {
                    acc = fma(qr[c], tile_a[j * D4 + c], acc);
                }
                s[j] = acc.x + acc.y + acc.z + acc.w;
                mt = max(mt, s[j]);
            }
        }
        if n > 0u {
            let correction = exp2(m - mt);
            l *= correction;
            for (var c = 0u; c < D4; c++) {
                o[c] *= correction;
            }
            m = mt;
        }
        for (var j = 0u; j < BT; j++) {
            if j < n {
                let pj = exp2(s[j] - m);
                l += pj;
                for (var c = 0u; c < D4; c++) {
                    o[c] = fma(vec4<f32>(pj), tile_b[j * D4 + c], o[c]);
                }
            }
        }
    }
    if live {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var c = 0u; c < D4; c++) {
            for (var e = 0u; e < 4u; e++) {
                let col = c * 4u + e;
                if col < p.d {
                    out[row * p.d + col] = o[c][e] * inv;
                }
            }
        }
        lse[row] = (m + log2(l)) * LN2;
    }
}
