// Fused attention backward, keys' side: one workgroup per (head, WG keys), one invocation per
// key holding its key and value rows and its dk, dv accumulators in registers. Queries and their
// output gradients are staged BT at a time in workgroup memory; each score is recomputed from
// q, k and the forward's log-sum-exp (p = exp(s - lse)): dv_j = sum_i p_ij dout_i and
// dk_j = scale * sum_i p_ij (dout_i . v_j - delta_i) q_i, with delta from
// attention_backward_dq.wgsl. Query tiles that see none of the workgroup's keys (causal) are
// skipped. Needs lib/attention_tiles.wgsl and its constants.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
// dq, dk and dv all go to one buffer (see lib/attention_tiles.wgsl); this kernel writes dk and
// dv, from dk_off and dv_off.
@group(0) @binding(7) var<storage, read_write> grads: array<f32>;

// Stages queries i0 .. i0 + BT of head b: q into tile_a and dout into tile_b (zeros past tq).
fn stage_q_dout(b: u32, i0: u32, lid: u32) {
    let qb = p.q_off + q_head_start(b);
    let ob = o_head_start(b);
    for (var e = lid; e < BT * D4; e += WG) {
        let i = i0 + e / D4;
        var qq = vec4<f32>(0.0);
        var gg = vec4<f32>(0.0);
        if i < p.tq {
            qq = load_q(qb + i * p.q_row, e % D4);
            gg = load_dout(ob + i * p.o_row, e % D4);
        }
        tile_a[e] = qq;
        tile_b[e] = gg;
    }
}

@compute @workgroup_size(WG)
fn attention_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lid: u32) {
    if wid.x + wid.y * nwg.x >= p.total {
        return;
    }
    let origin = tile_origin(wid, nwg);
    let b = origin.x;
    let j = origin.y + lid;
    let live = j < p.tk;
    let k_at = k_head_start(b) + j * p.k_row;
    let v_at = v_head_start(b) + j * p.v_row;
    var kr: array<vec4<f32>, D4>;
    var vr: array<vec4<f32>, D4>;
    var gk: array<vec4<f32>, D4>;
    var gv: array<vec4<f32>, D4>;
    if live {
        for (var c = 0u; c < D4; c++) {
            kr[c] = load_k(p.k_off + k_at, c) * p.scale_log2;
            vr[c] = load_v(p.v_off + v_at, c);
        }
    }
    // The first query that sees the workgroup's first key.
    let first = select(0u, max(origin.y, p.shift) - p.shift, p.causal == 1u);
    // This key is seen by queries i with j <= i + shift.
    let from_query = select(0u, max(j, p.shift) - p.shift, p.causal == 1u);
    for (var i0 = first; i0 < p.tq; i0 += BT) {
        workgroupBarrier();
        stage_q_dout(b, i0, lid);
        workgroupBarrier();
        if live {
            let rows = min(BT, p.tq - i0);
            for (var r = max(from_query, i0) - i0; r < rows; r++) {
                var s4 = vec4<f32>(0.0);
                var dp4 = vec4<f32>(0.0);
                for (var c = 0u; c < D4; c++) {
                    s4 = fma(tile_a[r * D4 + c], kr[c], s4);
                    dp4 = fma(tile_b[r * D4 + c], vr[c], dp4);
                }
                let qrow = b * p.tq + i0 + r;
                let pr = exp2(hsum(s4) - lse[qrow] * LOG2E);
                let ds = vec4<f32>(pr * (hsum(dp4) - delta[qrow]));
                for (var c = 0u; c < D4; c++) {
                    gv[c] = fma(vec4<f32>(pr), tile_b[r * D4 + c], gv[c]);
                    gk[c] = fma(ds, tile_a[r * D4 + c], gk[c]);
                }
            }
        }
    }
    if live {
        for (var c = 0u; c < D4; c++) {
            for (var e = 0u; e < 4u; e++) {
                let col = c * 4u + e;
                if col < p.d {
                    grads[p.dk_off + k_at + col] = gk[c][e] * p.scale;
                    grads[p.dv_off + v_at + col] = gv[c][e];
                }
            }
        }
    }
}
