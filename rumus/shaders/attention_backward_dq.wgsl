// Fused attention backward, queries' side: one workgroup per (head, WG queries), one invocation
// per query. Recomputes each score from q, k and the forward's log-sum-exp (p = exp(s - lse)),
// with keys and values staged BT at a time in workgroup memory, and accumulates
// dq_i = scale * sum_j p_ij (dout_i . v_j - delta_i) k_j in registers, where
// delta_i = dout_i . out_i, which it also writes for attention_backward_dkdv.wgsl (run after).
// Needs lib/attention_tiles.wgsl and its constants.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> out: array<f32>;
// dq, dk and dv all go to one buffer (see lib/attention_tiles.wgsl); this kernel writes dq.
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;

// Elements 4*c4 .. 4*c4+4 of the row of dout or out that starts at element `at`, zero at and
// beyond d (see load_q).
fn load_row(at: u32, c4: u32, from_dout: bool) -> vec4<f32> {
    let c = c4 * 4u;
    let i = at + c;
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = select(out[i + e], dout[i + e], from_dout);
    }
    return x;
}

@compute @workgroup_size(WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    if wid.x + wid.y * nwg.x >= p.total {
        return;
    }
    let origin = tile_origin(wid, nwg);
    let b = origin.x;
    let i = origin.y + lid;
    let live = i < p.tq;
    let row = b * p.tq + i;
    let q_at = q_head_start(b) + i * p.q_row;
    let o_at = o_head_start(b) + i * p.o_row;
    var qr: array<vec4<f32>, D4>;
    var dor: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, D4>;
    var di = 0.0;
    var lse2 = 0.0;
    if live {
        var dd = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) {
            qr[c] = load_q(p.q_off + q_at, c) * p.scale_log2;
            dor[c] = load_row(o_at, c, true);
            dd = fma(dor[c], load_row(o_at, c, false), dd);
        }
        di = hsum(dd);
        lse2 = lse[row] * LOG2E;
    }
    let end = keys_seen(min(origin.y + WG, p.tq) - 1u);
    let mine = select(0u, keys_seen(i), live);
    for (var j0 = 0u; j0 < end; j0 += BT) {
        workgroupBarrier();
        stage_kv(b, j0, lid);
        workgroupBarrier();
        let n = min(BT, max(mine, j0) - j0);
        // Keys two at a time (independent chains of multiply-adds); a second key past n (n is
        // odd, so below BT) is masked to p = 0.
        for (var j = 0u; j < n; j += 2u) {
            var s0 = vec4<f32>(0.0);
            var s1 = vec4<f32>(0.0);
            var dp0 = vec4<f32>(0.0);
            var dp1 = vec4<f32>(0.0);
            for (var c = 0u; c < D4; c++) {
                s0 = fma(qr[c], tile_a[j * D4 + c], s0);
                s1 = fma(qr[c], tile_a[(j + 1u) * D4 + c], s1);
                dp0 = fma(dor[c], tile_b[j * D4 + c], dp0);
                dp1 = fma(dor[c], tile_b[(j + 1u) * D4 + c], dp1);
            }
            let p0 = exp2(hsum(s0) - lse2);
            let p1 = select(0.0, exp2(hsum(s1) - lse2), j + 1u < n);
            let ds0 = vec4<f32>(p0 * (hsum(dp0) - di));
            let ds1 = vec4<f32>(p1 * (hsum(dp1) - di));
            for (var c = 0u; c < D4; c++) {
                acc[c] = fma(ds1, tile_a[(j + 1u) * D4 + c], fma(ds0, tile_a[j * D4 + c], acc[c]));
            }
        }
    }
    if live {
        for (var c = 0u; c < D4; c++) {
            for (var e = 0u; e < 4u; e++) {
                let col = c * 4u + e;
                if col < p.d {
                    dq[p.dq_off + q_at + col] = acc[c][e] * p.scale;
                }
            }
        }
        delta[row] = di;
    }
}
