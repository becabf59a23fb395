// Shared by the fused attention kernels (attention_forward.wgsl, attention_backward_dq.wgsl,
// attention_backward_dkdv.wgsl). The launcher writes before it the constants of one head-size
// variant: DMAX (the head dimension d rounded up to 32, 64 or 128), D4 = DMAX / 4,
// BT = 2048 / DMAX (the rows of a staged tile of lib/attention_row_tiles.wgsl) and BK (the rows
// of a block of lib/attention_blocks.wgsl). The including file binds q, k, v at 1-3.
//
// Head b's row i of q starts at element q_off + (b / heads)·q_outer + (b % heads)·q_head + i·q_row
// (q_off + q_head_start(b) + i·q_row), and likewise for k, v and the output o (out and dout, offset
// 0): `heads` = 1
// with [batch, t, d] contiguous tensors, or a packed projection [n, t, 3, heads, d] read in
// place (see `AttentionLayout` in backend/kernel_args.rs). The gradients dq, dk and dv are
// written into one buffer, with q's, k's and v's strides from dq_off, dk_off and dv_off.
// Lanes at or beyond d read as zero, so every loop over the head dimension runs to the
// compile-time D4 and a thread's rows stay in registers.
// Scores are kept in base-2 units (multiplied by scale * log2(e)) for exp2.

struct Params {
    tq: u32,
    tk: u32,
    d: u32,
    causal: u32,
    // tk - tq: with causal, query i sees keys 0 ..= i + shift.
    shift: u32,
    // Row tiles (of WG rows) per head, and batch * tiles workgroups in all.
    tiles: u32,
    total: u32,
    scale: f32,
    scale_log2: f32,
    heads: u32,
    q_off: u32,
    q_outer: u32,
    q_head: u32,
    q_row: u32,
    k_off: u32,
    k_outer: u32,
    k_head: u32,
    k_row: u32,
    v_off: u32,
    v_outer: u32,
    v_head: u32,
    v_row: u32,
    o_outer: u32,
    o_head: u32,
    o_row: u32,
    dq_off: u32,
    dk_off: u32,
    dv_off: u32,
}

// Invocations per workgroup, one per query (forward, dq) or key (dk, dv) row.
const WG: u32 = 64u;
// Stands for -infinity as a running maximum before any key (exp2 of it is 0, without NaN).
const NEG_BIG: f32 = -3.0e38;
const LN2: f32 = 0.6931471805599453;
const LOG2E: f32 = 1.4426950408889634;

// Where head b's rows of a tensor begin, before any tensor offset: the n = b / heads of its
// batch and its head h = b % heads.
fn head_start(b: u32, outer: u32, head: u32) -> u32 {
    return (b / p.heads) * outer + (b % p.heads) * head;
}

fn q_head_start(b: u32) -> u32 {
    return head_start(b, p.q_outer, p.q_head);
}

fn k_head_start(b: u32) -> u32 {
    return head_start(b, p.k_outer, p.k_head);
}

fn v_head_start(b: u32) -> u32 {
    return head_start(b, p.v_outer, p.v_head);
}

fn o_head_start(b: u32) -> u32 {
    return head_start(b, p.o_outer, p.o_head);
}

// Elements 4*c4 .. 4*c4+4 of the row of q, k or v that starts at element `at` (q_off and the like
// included), zero at and beyond d. The caller keeps the row inside the tensor; no element past
// the row is read (these kernels are compiled without runtime bounds checks, see
// `backend/wgpu/pipelines.rs`; `backend/wgpu/attention.rs` checks every row's extent).
fn load_q(at: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let i = at + c;
    if c + 4u <= p.d {
        return vec4<f32>(q[i], q[i + 1u], q[i + 2u], q[i + 3u]);
    }
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = q[i + e];
    }
    return x;
}

fn load_k(at: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let i = at + c;
    if c + 4u <= p.d {
        return vec4<f32>(k[i], k[i + 1u], k[i + 2u], k[i + 3u]);
    }
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = k[i + e];
    }
    return x;
}

fn load_v(at: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let i = at + c;
    if c + 4u <= p.d {
        return vec4<f32>(v[i], v[i + 1u], v[i + 2u], v[i + 3u]);
    }
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = v[i + e];
    }
    return x;
}

// The horizontal sum of a vec4 of partial dot products.
fn hsum(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// How many keys query i sees: 0 .. keys_seen(i).
fn keys_seen(i: u32) -> u32 {
    return select(p.tk, min(i + 1u + p.shift, p.tk), p.causal == 1u);
}

// Workgroup `tile` as (head, first row of its WG rows).
fn tile_origin(wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    let tile = wid.x + wid.y * nwg.x;
    return vec2<u32>(tile / p.tiles, (tile % p.tiles) * WG);
}
