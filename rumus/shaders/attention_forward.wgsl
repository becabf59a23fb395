// Fused attention forward (FlashAttention style): one workgroup per (head, WG queries), one
// invocation per query holding its query row and output row in registers. Keys and values are
// staged BT at a time in workgroup memory and folded into an online softmax; the scores never
// leave registers (keys are taken 4 at a time, the
// running maximum and sum rescaled only when the maximum grows). Tiles of keys no query of the workgroup sees (causal) are skipped.
// Writes out (o's layout) and lse [batch, tq], each query's log-sum-exp of its scaled scores
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
    let q_at = p.q_off + q_head_start(b) + i * p.q_row;
    let o_at = o_head_start(b) + i * p.o_row;
    var qr: array<vec4<f32>, D4>;
    var o: array<vec4<f32>, D4>;
    if live {
        for (var c = 0u; c < D4; c++) {
            qr[c] = load_q(q_at, c) * p.scale_log2;
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
        // Keys of this tile that this query sees, in chunks of 4 (BT is a multiple of 4; the
        // lanes of a last, partial chunk are masked to NEG_BIG, whose exp2 is 0).
        let n = min(BT, max(mine, j0) - j0);
        for (var j = 0u; j < n; j += 4u) {
            var a0 = vec4<f32>(0.0);
            var a1 = vec4<f32>(0.0);
            var a2 = vec4<f32>(0.0);
            var a3 = vec4<f32>(0.0);
            for (var c = 0u; c < D4; c++) {
                let qc = qr[c];
                a0 = fma(qc, tile_a[j * D4 + c], a0);
                a1 = fma(qc, tile_a[(j + 1u) * D4 + c], a1);
                a2 = fma(qc, tile_a[(j + 2u) * D4 + c], a2);
                a3 = fma(qc, tile_a[(j + 3u) * D4 + c], a3);
            }
            let valid = vec4<u32>(j, j + 1u, j + 2u, j + 3u) < vec4<u32>(n);
            let s = select(vec4<f32>(NEG_BIG), vec4<f32>(hsum(a0), hsum(a1), hsum(a2), hsum(a3)), valid);
            let mt = max(m, max(max(s.x, s.y), max(s.z, s.w)));
            if mt > m {
                let correction = exp2(m - mt);
                l *= correction;
                for (var c = 0u; c < D4; c++) {
                    o[c] *= correction;
                }
                m = mt;
            }
            let pj = exp2(s - vec4<f32>(m));
            l += hsum(pj);
            for (var c = 0u; c < D4; c++) {
                var acc = o[c];
                acc = fma(vec4<f32>(pj.x), tile_b[j * D4 + c], acc);
                acc = fma(vec4<f32>(pj.y), tile_b[(j + 1u) * D4 + c], acc);
                acc = fma(vec4<f32>(pj.z), tile_b[(j + 2u) * D4 + c], acc);
                o[c] = fma(vec4<f32>(pj.w), tile_b[(j + 3u) * D4 + c], acc);
            }
        }
    }
    if live {
        let inv = select(0.0, 1.0 / l, l > 0.0);
        for (var c = 0u; c < D4; c++) {
            for (var e = 0u; e < 4u; e++) {
                let col = c * 4u + e;
                if col < p.d {
                    out[o_at + col] = o[c][e] * inv;
                }
            }
        }
        lse[row] = (m + log2(l)) * LN2;
    }
}
