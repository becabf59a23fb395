// Fused attention backward, queries' side, blocked (see lib/attention_blocks.wgsl): one
// workgroup per (head, BK queries) holds its queries (scaled to base 2) and output gradients in
// workgroup memory, writes each query's delta = dout . out (for
// attention_backward_dkdv_blocked.wgsl, run after) and streams blocks of BK keys and values.
// For each block it recomputes p = exp(s - lse) and ds = p (dout . v - delta) and accumulates
// dq_i = scale * sum_j ds_ij k_j. Key blocks no query of the workgroup sees (causal) are skipped.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> out: array<f32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;

// Elements 4*c4 .. 4*c4+4 of a row of dout or out, zero at and beyond d (see load_q).
fn load_row(row: u32, c4: u32, from_dout: bool) -> vec4<f32> {
    let c = c4 * 4u;
    let i = row * p.d + c;
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = select(out[i + e], dout[i + e], from_dout);
    }
    return x;
}

// Stages queries q0 .. q0 + BK of head b (q scaled to base 2, dout, lse in base 2, delta, which
// it also writes out), zeros past tq.
fn stage_queries(b: u32, q0: u32, lid: u32) {
    for (var e = lid; e < BK * D4; e += BLOCK_WG) {
        let i = q0 + e / D4;
        var qq = vec4<f32>(0.0);
        var gg = vec4<f32>(0.0);
        if i < p.tq {
            qq = load_q(b * p.tq + i, e % D4) * p.scale_log2;
            gg = load_row(b * p.tq + i, e % D4, true);
        }
        own_a[block_index(e / D4, e % D4)] = qq;
        own_b[block_index(e / D4, e % D4)] = gg;
    }
    workgroupBarrier();
    if lid < BK {
        var l = 0.0;
        var dl = 0.0;
        let i = q0 + lid;
        if i < p.tq {
            let row = b * p.tq + i;
            var dd = vec4<f32>(0.0);
            for (var c = 0u; c < D4; c++) {
                dd = fma(own_b[block_index(lid, c)], load_row(row, c, false), dd);
            }
            dl = hsum(dd);
            l = lse[row] * LOG2E;
            delta[row] = dl;
        }
        row_lse[lid] = l;
        row_delta[lid] = dl;
    }
}

// Stages keys j0 .. j0 + BK of head b (k, v), zeros past tk.
fn stage_keys(b: u32, j0: u32, lid: u32) {
    for (var e = lid; e < BK * D4; e += BLOCK_WG) {
        let j = j0 + e / D4;
        var kk = vec4<f32>(0.0);
        var vv = vec4<f32>(0.0);
        if j < p.tk {
            kk = load_k(b * p.tk + j, e % D4);
            vv = load_v(b * p.tk + j, e % D4);
        }
        str_a[block_index(e / D4, e % D4)] = kk;
        str_b[block_index(e / D4, e % D4)] = vv;
    }
}

// ds of the block of keys from j0 for the queries from q0, into dscore.
fn block_dscores(q0: u32, j0: u32, lid: u32) {
    let sp = score_patch(lid);
    for (var a = 0u; a < SA; a++) {
        let ql = lid / 16u + 16u * a;
        let i = q0 + ql;
        for (var bb = 0u; bb < SA; bb++) {
            let j = j0 + lid % 16u + 16u * bb;
            let seen = j < p.tk && (p.causal == 0u || j <= i + p.shift);
            let pr = select(0.0, exp2(hsum(sp.s[a * SA + bb]) - row_lse[ql]), i < p.tq && seen);
            dscore[ql * BK + lid % 16u + 16u * bb] = pr * (hsum(sp.dp[a * SA + bb]) - row_delta[ql]);
        }
    }
}

@compute @workgroup_size(BLOCK_WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * nwg.x;
    if group >= p.total {
        return;
    }
    let b = group / p.tiles;
    let q0 = (group % p.tiles) * BK;
    stage_queries(b, q0, lid);
    let og = lid / D4;
    let col = lid % D4;
    var acc: array<vec4<f32>, KR>;
    let end = keys_seen(min(q0 + BK, p.tq) - 1u);
    for (var j0 = 0u; j0 < end; j0 += BK) {
        workgroupBarrier();
        stage_keys(b, j0, lid);
        workgroupBarrier();
        block_dscores(q0, j0, lid);
        workgroupBarrier();
        for (var r = 0u; r < BK; r++) {
            let ka = str_a[block_index(r, col)];
            for (var a = 0u; a < KR; a++) {
                acc[a] = fma(vec4<f32>(dscore[out_row(og, a) * BK + r]), ka, acc[a]);
            }
        }
    }
    for (var a = 0u; a < KR; a++) {
        let i = q0 + out_row(og, a);
        if i < p.tq {
            let row = b * p.tq + i;
            for (var e = 0u; e < 4u; e++) {
                let c = col * 4u + e;
                if c < p.d {
                    dq[row * p.d + c] = acc[a][e] * p.scale;
                }
            }
        }
    }
}
