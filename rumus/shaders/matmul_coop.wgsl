// Batched matmul on tensor cores (the experimental cooperative-matrix feature), with f16 inputs
// and f32 accumulation: the opt-in reduced-precision path, like PyTorch's allow_tf32 (f16 has
// TF32's 10-bit mantissa, but only a 5-bit exponent: magnitudes past 65504 overflow).
// Same parameters and output as `matmul.wgsl`, for the operands `matmul_vec4.wgsl` takes
// (contiguous side, offsets and strides multiples of 4; the dispatcher checks), read as vec4s.
//
// A workgroup of 256 invocations (8 subgroups of 32; the dispatcher checks the adapter's
// subgroup size) computes a 128×256 tile. K goes in slices of BK = 32, converted to f16 on the
// way into shared memory, where each operand keeps its own memory order (so the 4 elements of a
// vec4 land side by side) and the fragment loads say which order that is. One shared buffer per
// operand: the next slice is fetched into registers while the current one is multiplied, then
// stored between two barriers. The subgroups sit 2 × 4 over the tile and each owns a 64×64 block:
// 4×4 accumulators of 16×16, so each fragment loaded from shared memory feeds four products.
// (On an H100, 4096³ NN / TN / NT: 155 / 160 / 144 TFLOP/s; K slices of 16 double-buffered
// 139 / 141 / 130; the 128×128 tile with 2×4 accumulators per subgroup 116 / 124 / 111;
// `tools/src/bin/matmul_lab.rs` timed them.)

enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    batch: u32,
    m: u32,
    k: u32,
    n: u32,
    lhs_offset: u32,
    lhs_batch: u32,
    lhs_row: u32,
    lhs_col: u32,
    rhs_offset: u32,
    rhs_batch: u32,
    rhs_row: u32,
    rhs_col: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lhs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> rhs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// Tile sides (the dispatcher's grid follows them) and K slice.
const LTILE_M: u32 = 128u;
const LTILE_N: u32 = 256u;
const BK: u32 = 32u;
// Shared rows are padded by 8 halves (16 bytes) so the rows a fragment load touches start on
// different banks. An operand's slice is tile-side rows of BK (contiguous along k) or BK rows of
// the tile side (contiguous along the tile side); a buffer holds either.
const KA_ROW: u32 = BK + 8u;
const TA_ROW: u32 = LTILE_M + 8u;
const TB_ROW: u32 = LTILE_N + 8u;
const SLICE_A: u32 = max(LTILE_M * KA_ROW, BK * TA_ROW);
const SLICE_B: u32 = max(LTILE_N * KA_ROW, BK * TB_ROW);
// vec4s of each operand per slice that one invocation moves.
const LOADS_A: u32 = 4u;
const LOADS_B: u32 = 8u;

var<workgroup> sa: array<f16, SLICE_A>;
var<workgroup> sb: array<f16, SLICE_B>;
// One 16×16 f32 block per subgroup, for stores of tiles that cross the matrix edge.
var<workgroup> edge: array<f32, 8u * 256u>;

// The 4 elements of lhs from (r, gk) along its contiguous side, zero outside the matrix
// (alignment makes every vector wholly inside or wholly outside).
fn lhs_at(base: u32, r: u32, gk: u32) -> vec4<f32> {
    if r < p.m && gk < p.k {
        return lhs[(base + r * p.lhs_row + gk * p.lhs_col) / 4u];
    }
    return vec4<f32>(0.0);
}

fn rhs_at(base: u32, gk: u32, c: u32) -> vec4<f32> {
    if c < p.n && gk < p.k {
        return rhs[(base + gk * p.rhs_row + c * p.rhs_col) / 4u];
    }
    return vec4<f32>(0.0);
}

// Where vec4 load `t` of invocation `lid` lands in the slice: (row, k) of lhs and (k, col) of
// rhs, each the first of its 4 elements. Consecutive invocations read along the contiguous side.
fn lhs_coord(lid: u32, t: u32, k_fast: bool) -> vec2<u32> {
    let i = lid + t * 256u;
    if k_fast {
        return vec2<u32>(i / (BK / 4u), (i % (BK / 4u)) * 4u);
    }
    return vec2<u32>((i % (LTILE_M / 4u)) * 4u, i / (LTILE_M / 4u));
}

fn rhs_coord(lid: u32, t: u32, n_fast: bool) -> vec2<u32> {
    let i = lid + t * 256u;
    if n_fast {
        return vec2<u32>(i / (LTILE_N / 4u), (i % (LTILE_N / 4u)) * 4u);
    }
    return vec2<u32>((i % (BK / 4u)) * 4u, i / (BK / 4u));
}

// Stores a fetched vec4 as f16 at `at` (row, k) of lhs or (k, col) of rhs in buffer `buf`, in
// the operand's own memory order: its 4 elements are consecutive there.
fn stash_lhs(buf: u32, at: vec2<u32>, v: vec4<f32>, k_fast: bool) {
    let first = buf + select(at.y * TA_ROW + at.x, at.x * KA_ROW + at.y, k_fast);
    let h = vec4<f16>(v);
    sa[first] = h.x;
    sa[first + 1u] = h.y;
    sa[first + 2u] = h.z;
    sa[first + 3u] = h.w;
}

fn stash_rhs(buf: u32, at: vec2<u32>, v: vec4<f32>, n_fast: bool) {
    let first = buf + select(at.y * KA_ROW + at.x, at.x * TB_ROW + at.y, n_fast);
    let h = vec4<f16>(v);
    sb[first] = h.x;
    sb[first + 1u] = h.y;
    sb[first + 2u] = h.z;
    sb[first + 3u] = h.w;
}

// Writes accumulator block (r0, c0) of the output: straight from the fragment inside the
// matrix, through this subgroup's slot of `edge` where the block crosses its edge.
fn store_block(acc: coop_mat16x16<f32, C>, base: u32, r0: u32, c0: u32, warp: u32, lane: u32, interior: bool) {
    // Index and stride are bound first: naga 30's SPIR-V writer misses expressions that appear
    // only inside coopStore's arguments.
    let n = p.n;
    let at = base + r0 * n + c0;
    let slot = warp * 256u;
    let block = 16u;
    if interior {
        coopStoreT(acc, &out[at], n);
        return;
    }
    coopStoreT(acc, &edge[slot], block);
    // Only this subgroup's own slot is involved; WGSL has no subgroup-scoped barrier for
    // workgroup memory, and every subgroup reaches this one equally often.
    workgroupBarrier();
    for (var i = lane; i < 256u; i += 32u) {
        let r = r0 + i / 16u;
        let c = c0 + i % 16u;
        if r < p.m && c < p.n {
            out[base + r * p.n + c] = edge[slot + i];
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(256)
fn matmul_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let lane = lid % 32u;
    let warp = lid / 32u;
    let wm = (warp / 4u) * 64u;
    let wn = (warp % 4u) * 64u;
    let tiles_n = (p.n + LTILE_N - 1u) / LTILE_N;
    let tiles_m = (p.m + LTILE_M - 1u) / LTILE_M;
    let lhs_k_fast = p.lhs_col == 1u;
    let rhs_n_fast = p.rhs_col == 1u;
    var ac: array<vec2<u32>, LOADS_A>;
    var bc: array<vec2<u32>, LOADS_B>;
    for (var t = 0u; t < LOADS_A; t++) {
        ac[t] = lhs_coord(lid, t, lhs_k_fast);
    }
    for (var t = 0u; t < LOADS_B; t++) {
        bc[t] = rhs_coord(lid, t, rhs_n_fast);
    }
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        let lhs_base = p.lhs_offset + b * p.lhs_batch;
        let rhs_base = p.rhs_offset + b * p.rhs_batch;
        let out_base = b * p.m * p.n;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * LTILE_M;
                let col0 = tn * LTILE_N;
                var acc00: coop_mat16x16<f32, C>;
                var acc01: coop_mat16x16<f32, C>;
                var acc02: coop_mat16x16<f32, C>;
                var acc03: coop_mat16x16<f32, C>;
                var acc10: coop_mat16x16<f32, C>;
                var acc11: coop_mat16x16<f32, C>;
                var acc12: coop_mat16x16<f32, C>;
                var acc13: coop_mat16x16<f32, C>;
                var acc20: coop_mat16x16<f32, C>;
                var acc21: coop_mat16x16<f32, C>;
                var acc22: coop_mat16x16<f32, C>;
                var acc23: coop_mat16x16<f32, C>;
                var acc30: coop_mat16x16<f32, C>;
                var acc31: coop_mat16x16<f32, C>;
                var acc32: coop_mat16x16<f32, C>;
                var acc33: coop_mat16x16<f32, C>;
                var ra: array<vec4<f32>, LOADS_A>;
                var rb: array<vec4<f32>, LOADS_B>;
                for (var t = 0u; t < LOADS_A; t++) {
                    ra[t] = lhs_at(lhs_base, row0 + ac[t].x, ac[t].y);
                }
                for (var t = 0u; t < LOADS_B; t++) {
                    rb[t] = rhs_at(rhs_base, bc[t].x, col0 + bc[t].y);
                }
                for (var t = 0u; t < LOADS_A; t++) {
                    stash_lhs(0u, ac[t], ra[t], lhs_k_fast);
                }
                for (var t = 0u; t < LOADS_B; t++) {
                    stash_rhs(0u, bc[t], rb[t], rhs_n_fast);
                }
                workgroupBarrier();
                for (var k0 = 0u; k0 < p.k; k0 += BK) {
                    let next = k0 + BK;
                    if next < p.k {
                        for (var t = 0u; t < LOADS_A; t++) {
                            ra[t] = lhs_at(lhs_base, row0 + ac[t].x, next + ac[t].y);
                        }
                        for (var t = 0u; t < LOADS_B; t++) {
                            rb[t] = rhs_at(rhs_base, next + bc[t].x, col0 + bc[t].y);
                        }
                    }
                    for (var kk = 0u; kk < BK; kk += 16u) {
                        // Fragment loads in the order each operand sits in: row-major (T) or
                        // column-major. The branches are uniform.
                        var a0: coop_mat16x16<f16, A>;
                        var a1: coop_mat16x16<f16, A>;
                        var a2: coop_mat16x16<f16, A>;
                        var a3: coop_mat16x16<f16, A>;
                        if lhs_k_fast {
                            let at0 = (wm + 0u) * KA_ROW + kk;
                            a0 = coopLoadT<coop_mat16x16<f16, A>>(&sa[at0], KA_ROW);
                            let at1 = (wm + 16u) * KA_ROW + kk;
                            a1 = coopLoadT<coop_mat16x16<f16, A>>(&sa[at1], KA_ROW);
                            let at2 = (wm + 32u) * KA_ROW + kk;
                            a2 = coopLoadT<coop_mat16x16<f16, A>>(&sa[at2], KA_ROW);
                            let at3 = (wm + 48u) * KA_ROW + kk;
                            a3 = coopLoadT<coop_mat16x16<f16, A>>(&sa[at3], KA_ROW);
                        } else {
                            let at0 = kk * TA_ROW + wm + 0u;
                            a0 = coopLoad<coop_mat16x16<f16, A>>(&sa[at0], TA_ROW);
                            let at1 = kk * TA_ROW + wm + 16u;
                            a1 = coopLoad<coop_mat16x16<f16, A>>(&sa[at1], TA_ROW);
                            let at2 = kk * TA_ROW + wm + 32u;
                            a2 = coopLoad<coop_mat16x16<f16, A>>(&sa[at2], TA_ROW);
                            let at3 = kk * TA_ROW + wm + 48u;
                            a3 = coopLoad<coop_mat16x16<f16, A>>(&sa[at3], TA_ROW);
                        }
                        var b0: coop_mat16x16<f16, B>;
                        var b1: coop_mat16x16<f16, B>;
                        var b2: coop_mat16x16<f16, B>;
                        var b3: coop_mat16x16<f16, B>;
                        if rhs_n_fast {
                            let bt0 = kk * TB_ROW + wn + 0u;
                            b0 = coopLoadT<coop_mat16x16<f16, B>>(&sb[bt0], TB_ROW);
                            let bt1 = kk * TB_ROW + wn + 16u;
                            b1 = coopLoadT<coop_mat16x16<f16, B>>(&sb[bt1], TB_ROW);
                            let bt2 = kk * TB_ROW + wn + 32u;
                            b2 = coopLoadT<coop_mat16x16<f16, B>>(&sb[bt2], TB_ROW);
                            let bt3 = kk * TB_ROW + wn + 48u;
                            b3 = coopLoadT<coop_mat16x16<f16, B>>(&sb[bt3], TB_ROW);
                        } else {
                            let bt0 = (wn + 0u) * KA_ROW + kk;
                            b0 = coopLoad<coop_mat16x16<f16, B>>(&sb[bt0], KA_ROW);
                            let bt1 = (wn + 16u) * KA_ROW + kk;
                            b1 = coopLoad<coop_mat16x16<f16, B>>(&sb[bt1], KA_ROW);
                            let bt2 = (wn + 32u) * KA_ROW + kk;
                            b2 = coopLoad<coop_mat16x16<f16, B>>(&sb[bt2], KA_ROW);
                            let bt3 = (wn + 48u) * KA_ROW + kk;
                            b3 = coopLoad<coop_mat16x16<f16, B>>(&sb[bt3], KA_ROW);
                        }
                        acc00 = coopMultiplyAdd(a0, b0, acc00);
                        acc01 = coopMultiplyAdd(a0, b1, acc01);
                        acc02 = coopMultiplyAdd(a0, b2, acc02);
                        acc03 = coopMultiplyAdd(a0, b3, acc03);
                        acc10 = coopMultiplyAdd(a1, b0, acc10);
                        acc11 = coopMultiplyAdd(a1, b1, acc11);
                        acc12 = coopMultiplyAdd(a1, b2, acc12);
                        acc13 = coopMultiplyAdd(a1, b3, acc13);
                        acc20 = coopMultiplyAdd(a2, b0, acc20);
                        acc21 = coopMultiplyAdd(a2, b1, acc21);
                        acc22 = coopMultiplyAdd(a2, b2, acc22);
                        acc23 = coopMultiplyAdd(a2, b3, acc23);
                        acc30 = coopMultiplyAdd(a3, b0, acc30);
                        acc31 = coopMultiplyAdd(a3, b1, acc31);
                        acc32 = coopMultiplyAdd(a3, b2, acc32);
                        acc33 = coopMultiplyAdd(a3, b3, acc33);
                    }
                    // Everyone has read the slice before it is overwritten with the next.
                    workgroupBarrier();
                    if next < p.k {
                        for (var t = 0u; t < LOADS_A; t++) {
                            stash_lhs(0u, ac[t], ra[t], lhs_k_fast);
                        }
                        for (var t = 0u; t < LOADS_B; t++) {
                            stash_rhs(0u, bc[t], rb[t], rhs_n_fast);
                        }
                    }
                    workgroupBarrier();
                }
                // Workgroup-uniform, so every subgroup takes the same branch in store_block.
                let interior = row0 + LTILE_M <= p.m && col0 + LTILE_N <= p.n;
                let r = row0 + wm;
                let c = col0 + wn;
                store_block(acc00, out_base, r + 0u, c + 0u, warp, lane, interior);
                store_block(acc01, out_base, r + 0u, c + 16u, warp, lane, interior);
                store_block(acc02, out_base, r + 0u, c + 32u, warp, lane, interior);
                store_block(acc03, out_base, r + 0u, c + 48u, warp, lane, interior);
                store_block(acc10, out_base, r + 16u, c + 0u, warp, lane, interior);
                store_block(acc11, out_base, r + 16u, c + 16u, warp, lane, interior);
                store_block(acc12, out_base, r + 16u, c + 32u, warp, lane, interior);
                store_block(acc13, out_base, r + 16u, c + 48u, warp, lane, interior);
                store_block(acc20, out_base, r + 32u, c + 0u, warp, lane, interior);
                store_block(acc21, out_base, r + 32u, c + 16u, warp, lane, interior);
                store_block(acc22, out_base, r + 32u, c + 32u, warp, lane, interior);
                store_block(acc23, out_base, r + 32u, c + 48u, warp, lane, interior);
                store_block(acc30, out_base, r + 48u, c + 0u, warp, lane, interior);
                store_block(acc31, out_base, r + 48u, c + 16u, warp, lane, interior);
                store_block(acc32, out_base, r + 48u, c + 32u, warp, lane, interior);
                store_block(acc33, out_base, r + 48u, c + 48u, warp, lane, interior);
            }
        }
    }
}
