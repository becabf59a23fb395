// Fused attention backward, keys' side, blocked (see lib/attention_blocks.wgsl): one workgroup
// per (head, BK keys) holds its keys (scaled to base 2) and values in workgroup memory and
// streams blocks of BK queries with their output gradients. For each block it recomputes
// p = exp(s - lse) and ds = p (dout . v - delta) (delta from attention_backward_dq.wgsl),
// then accumulates dv_j = sum_i p_ij dout_i and dk_j = scale * sum_i ds_ij q_i. Query blocks
// that see none of the keys (causal) are skipped. No atomics: each output has one writer.

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

// Stages keys k0 .. k0 + BK of head b (k scaled to base 2, v), zeros past tk.
fn stage_keys(b: u32, k0: u32, lid: u32) {
    let kb = p.k_off + k_head_start(b);
    let vb = p.v_off + v_head_start(b);
    for (var e = lid; e < BK * D4; e += BLOCK_WG) {
        let j = k0 + e / D4;
        var kk = vec4<f32>(0.0);
        var vv = vec4<f32>(0.0);
        if j < p.tk {
            kk = load_k(kb + j * p.k_row, e % D4) * p.scale_log2;
            vv = load_v(vb + j * p.v_row, e % D4);
        }
        own_a[block_index(e / D4, e % D4)] = kk;
        own_b[block_index(e / D4, e % D4)] = vv;
    }
}

// Stages queries i0 .. i0 + BK of head b (q, dout, lse in base 2, delta), zeros past tq.
fn stage_queries(b: u32, i0: u32, lid: u32) {
    let qb = p.q_off + q_head_start(b);
    let ob = o_head_start(b);
    for (var e = lid; e < BK * D4; e += BLOCK_WG) {
        let i = i0 + e / D4;
        var qq = vec4<f32>(0.0);
        var gg = vec4<f32>(0.0);
        if i < p.tq {
            qq = load_q(qb + i * p.q_row, e % D4);
            gg = load_dout(ob + i * p.o_row, e % D4);
        }
        str_a[block_index(e / D4, e % D4)] = qq;
        str_b[block_index(e / D4, e % D4)] = gg;
    }
    if lid < BK {
        var l = 0.0;
        var dl = 0.0;
        if i0 + lid < p.tq {
            l = lse[b * p.tq + i0 + lid] * LOG2E;
            dl = delta[b * p.tq + i0 + lid];
        }
        row_lse[lid] = l;
        row_delta[lid] = dl;
    }
}

// p and ds of query ql (of the block from i0) for key kl (of the block from k0), from the
// score s and dout . v, into prob and dscore.
fn put_entry(k0: u32, i0: u32, kl: u32, ql: u32, s: vec4<f32>, dp: vec4<f32>) {
    let i = i0 + ql;
    let seen = p.causal == 0u || k0 + kl <= i + p.shift;
    let pr = select(0.0, exp2(hsum(s) - row_lse[ql]), i < p.tq && seen);
    put_prob(kl, ql, pr);
    put_dscore(kl, ql, pr * (hsum(dp) - row_delta[ql]));
}

// p and ds of the block of queries from i0 for keys from k0, into prob and dscore.
fn block_probs(k0: u32, i0: u32, lid: u32) {
    let r = patch_row(lid);
    let c = patch_col(lid);
    let x = score_patch(r, c);
    put_entry(k0, i0, r, c, x.s00, x.d00);
    put_entry(k0, i0, r, c + 16u, x.s01, x.d01);
    put_entry(k0, i0, r + 16u, c, x.s10, x.d10);
    put_entry(k0, i0, r + 16u, c + 16u, x.s11, x.d11);
}

// Writes dk (times scale) and dv of key j of head b, vec4 column col, if j is a key.
fn write_key(b: u32, j: u32, col: u32, gk: vec4<f32>, gv: vec4<f32>) {
    if j < p.tk {
        let k_at = p.dk_off + k_head_start(b) + j * p.k_row;
        let v_at = p.dv_off + v_head_start(b) + j * p.v_row;
        for (var e = 0u; e < 4u; e++) {
            let c = col * 4u + e;
            if c < p.d {
                grads[k_at + c] = gk[e] * p.scale;
                grads[v_at + c] = gv[e];
            }
        }
    }
}

@compute @workgroup_size(BLOCK_WG)
fn attention_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * nwg.x;
    if group >= p.total {
        return;
    }
    let b = group / p.tiles;
    let k0 = (group % p.tiles) * BK;
    stage_keys(b, k0, lid);
    // Outputs: keys og and og + 16, vec4 column col (invocations with col >= D4 idle).
    let og = lid / 16u;
    let col = min(lid % 16u, D4 - 1u);
    var gk0 = vec4<f32>(0.0);
    var gk1 = vec4<f32>(0.0);
    var gv0 = vec4<f32>(0.0);
    var gv1 = vec4<f32>(0.0);
    // The first query that sees the block's first key.
    let first = select(0u, max(k0, p.shift) - p.shift, p.causal == 1u);
    for (var i0 = first; i0 < p.tq; i0 += BK) {
        workgroupBarrier();
        stage_queries(b, i0, lid);
        workgroupBarrier();
        block_probs(k0, i0, lid);
        workgroupBarrier();
        for (var r4 = 0u; r4 < BK / 4u; r4++) {
            let p0 = prob[og * (BK / 4u) + r4];
            let p1 = prob[(og + 16u) * (BK / 4u) + r4];
            let d0 = dscore[og * (BK / 4u) + r4];
            let d1 = dscore[(og + 16u) * (BK / 4u) + r4];
            for (var e = 0u; e < 4u; e++) {
                let qa = str_a[block_index(r4 * 4u + e, col)];
                let ga = str_b[block_index(r4 * 4u + e, col)];
                gv0 = fma(vec4<f32>(p0[e]), ga, gv0);
                gv1 = fma(vec4<f32>(p1[e]), ga, gv1);
                gk0 = fma(vec4<f32>(d0[e]), qa, gk0);
                gk1 = fma(vec4<f32>(d1[e]), qa, gk1);
            }
        }
    }
    if lid % 16u < D4 {
        write_key(b, k0 + og, col, gk0, gv0);
        write_key(b, k0 + og + 16u, col, gk1, gv1);
    }
}
