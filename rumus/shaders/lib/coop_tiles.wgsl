// The tensor-core tiles of matmul_coop.wgsl and conv2d_coop.wgsl: one 128×256 output tile of a
// product on tensor cores (the experimental cooperative-matrix feature), f16 inputs and f32
// accumulation.
//
// A workgroup of 256 invocations (8 subgroups of 32; the dispatchers check the adapter's
// subgroup size) computes the tile. K goes in slices of BK = 32, converted to f16 on the way into
// shared memory, where each operand keeps the order in which it is fetched (so the 4 elements a
// fetch brings land side by side) and the fragment loads say which order that is. One shared
// buffer per operand: the next slice is fetched into registers while the current one is
// multiplied, then stored between two barriers. The subgroups sit 2 × 4 over the tile and each
// owns a 64×64 block: 4×4 accumulators of 16×16, so each fragment loaded from shared memory feeds
// four products. (On an H100, matmul 4096³ NN / TN / NT: 155 / 160 / 144 TFLOP/s; K slices of 16
// double-buffered 139 / 141 / 130; the 128×128 tile with 2×4 accumulators per subgroup 116 / 124
// / 111; `tools/src/bin/matmul_lab.rs` timed them.)
//
// The module opens with `coop_tiles.rs`'s prelude: the directives for f16 and cooperative
// matrices (they precede every included file), and
//   const LHS_K_FAST: bool, const RHS_N_FAST: bool
//       the side each operand is fetched along: the left's along k (else along its rows), the
//       right's along its columns (else along k). Constants, so that the fragment loads that
//       depend on them stay in uniform control flow.
// The file that includes this says where the operands and the output are:
//   fn lhs_fetch(t: u32, r: u32, k: u32) -> vec4<f32>
//       the 4 elements of the left operand from (r, k) along its side, zero outside the
//       product (`t`, below LOADS_A, is the fetch's number: lhs_coord);
//   fn rhs_fetch(t: u32, k: u32, c: u32) -> vec4<f32>
//       the right operand's, from (k, c) (`t` below LOADS_B: rhs_coord);
//   fn begin_slice(k0: u32, lid: u32)
//       called before the fetches of the slice at k0 (for what they share);
//   fn seeds_rows() -> bool, fn row_seed(r: u32) -> f32
//       whether the accumulators start from a value per row (a bias) instead of zero, and that
//       value (seeds_rows must be uniform: it reads only constants and the uniform parameters);
//   fn out_block(r: u32, c: u32) -> u32, fn out_stride() -> u32
//       where output element (r, c) is, and the distance between rows of a 16×16 block there;
//   fn out_put(r: u32, c: u32, v: f32)
//       writes element (r, c) if it is inside the output;
// and the output `out: array<f32>`, which blocks inside it are stored to directly.

// Tile sides (the dispatchers' grids follow them) and K slice.
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
// Loads of 4 elements of each operand per slice that one invocation makes.
const LOADS_A: u32 = 4u;
const LOADS_B: u32 = 8u;

var<workgroup> sa: array<f16, SLICE_A>;
var<workgroup> sb: array<f16, SLICE_B>;
// One 16×16 f32 block per subgroup, for stores of tiles that cross the output's edge.
var<workgroup> edge: array<f32, 8u * 256u>;

// This invocation's 4×4 accumulators of the tile (rows 16·i, columns 16·j of its subgroup's block).
var<private> acc00: coop_mat16x16<f32, C>;
var<private> acc01: coop_mat16x16<f32, C>;
var<private> acc02: coop_mat16x16<f32, C>;
var<private> acc03: coop_mat16x16<f32, C>;
var<private> acc10: coop_mat16x16<f32, C>;
var<private> acc11: coop_mat16x16<f32, C>;
var<private> acc12: coop_mat16x16<f32, C>;
var<private> acc13: coop_mat16x16<f32, C>;
var<private> acc20: coop_mat16x16<f32, C>;
var<private> acc21: coop_mat16x16<f32, C>;
var<private> acc22: coop_mat16x16<f32, C>;
var<private> acc23: coop_mat16x16<f32, C>;
var<private> acc30: coop_mat16x16<f32, C>;
var<private> acc31: coop_mat16x16<f32, C>;
var<private> acc32: coop_mat16x16<f32, C>;
var<private> acc33: coop_mat16x16<f32, C>;

// Where load `t` of invocation `lid` lands in the slice: (row, k) of lhs and (k, col) of rhs,
// each the first of its 4 elements. Consecutive invocations read along the fast side.
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

// Stores a fetched vec4 as f16 at `at` (row, k) of lhs or (k, col) of rhs, in the operand's own
// memory order: its 4 elements are consecutive there.
fn stash_lhs(at: vec2<u32>, v: vec4<f32>, k_fast: bool) {
    let first = select(at.y * TA_ROW + at.x, at.x * KA_ROW + at.y, k_fast);
    let h = vec4<f16>(v);
    sa[first] = h.x;
    sa[first + 1u] = h.y;
    sa[first + 2u] = h.z;
    sa[first + 3u] = h.w;
}

fn stash_rhs(at: vec2<u32>, v: vec4<f32>, n_fast: bool) {
    let first = select(at.y * KA_ROW + at.x, at.x * TB_ROW + at.y, n_fast);
    let h = vec4<f16>(v);
    sb[first] = h.x;
    sb[first + 1u] = h.y;
    sb[first + 2u] = h.z;
    sb[first + 3u] = h.w;
}

// The products of the slice in shared memory on this subgroup's block at (wm, wn) of the tile.
fn multiply_slice(wm: u32, wn: u32) {
    for (var kk = 0u; kk < BK; kk += 16u) {
        // Fragment loads in the order each operand sits in: row-major (T) or column-major. The
        // branches are uniform.
        var a0: coop_mat16x16<f16, A>;
        var a1: coop_mat16x16<f16, A>;
        var a2: coop_mat16x16<f16, A>;
        var a3: coop_mat16x16<f16, A>;
        if LHS_K_FAST {
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
        if RHS_N_FAST {
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
}

// A 16×16 block whose row r is `row_seed(r0 + r)`, through this subgroup's slot of `edge`.
fn seeded(r0: u32, warp: u32, lane: u32) -> coop_mat16x16<f32, C> {
    let slot = warp * 256u;
    let block = 16u;
    for (var i = lane; i < 256u; i += 32u) {
        edge[slot + i] = row_seed(r0 + i / 16u);
    }
    workgroupBarrier();
    let seed = coopLoadT<coop_mat16x16<f32, C>>(&edge[slot], block);
    workgroupBarrier();
    return seed;
}

// The tile at (row0, col0) of the product over k in [k_begin, k_end) into the accumulators,
// which start from zero, or from `row_seed` of their rows where `seeds_rows()`. k_begin is a
// multiple of BK; a slice that reaches past k_end reads what the fetches give there, so k_end
// must be where the product's K ends or a multiple of BK.
// Called by every invocation of the workgroup with the same arguments (it has barriers).
fn multiply_tile(row0: u32, col0: u32, k_begin: u32, k_end: u32, lid: u32) {
    let warp = lid / 32u;
    let wm = (warp / 4u) * 64u;
    let wn = (warp % 4u) * 64u;
    var s0: coop_mat16x16<f32, C>;
    var s1: coop_mat16x16<f32, C>;
    var s2: coop_mat16x16<f32, C>;
    var s3: coop_mat16x16<f32, C>;
    if seeds_rows() {
        s0 = seeded(row0 + wm, warp, lid % 32u);
        s1 = seeded(row0 + wm + 16u, warp, lid % 32u);
        s2 = seeded(row0 + wm + 32u, warp, lid % 32u);
        s3 = seeded(row0 + wm + 48u, warp, lid % 32u);
    }
    acc00 = s0;
    acc01 = s0;
    acc02 = s0;
    acc03 = s0;
    acc10 = s1;
    acc11 = s1;
    acc12 = s1;
    acc13 = s1;
    acc20 = s2;
    acc21 = s2;
    acc22 = s2;
    acc23 = s2;
    acc30 = s3;
    acc31 = s3;
    acc32 = s3;
    acc33 = s3;
    var ac: array<vec2<u32>, LOADS_A>;
    var bc: array<vec2<u32>, LOADS_B>;
    for (var t = 0u; t < LOADS_A; t++) {
        ac[t] = lhs_coord(lid, t, LHS_K_FAST);
    }
    for (var t = 0u; t < LOADS_B; t++) {
        bc[t] = rhs_coord(lid, t, RHS_N_FAST);
    }
    var ra: array<vec4<f32>, LOADS_A>;
    var rb: array<vec4<f32>, LOADS_B>;
    begin_slice(k_begin, lid);
    for (var t = 0u; t < LOADS_A; t++) {
        ra[t] = lhs_fetch(t, row0 + ac[t].x, k_begin + ac[t].y);
    }
    for (var t = 0u; t < LOADS_B; t++) {
        rb[t] = rhs_fetch(t, k_begin + bc[t].x, col0 + bc[t].y);
    }
    for (var t = 0u; t < LOADS_A; t++) {
        stash_lhs(ac[t], ra[t], LHS_K_FAST);
    }
    for (var t = 0u; t < LOADS_B; t++) {
        stash_rhs(bc[t], rb[t], RHS_N_FAST);
    }
    workgroupBarrier();
    for (var k0 = k_begin; k0 < k_end; k0 += BK) {
        let next = k0 + BK;
        if next < k_end {
            begin_slice(next, lid);
            for (var t = 0u; t < LOADS_A; t++) {
                ra[t] = lhs_fetch(t, row0 + ac[t].x, next + ac[t].y);
            }
            for (var t = 0u; t < LOADS_B; t++) {
                rb[t] = rhs_fetch(t, next + bc[t].x, col0 + bc[t].y);
            }
        }
        multiply_slice(wm, wn);
        // Everyone has read the slice before it is overwritten with the next.
        workgroupBarrier();
        if next < k_end {
            for (var t = 0u; t < LOADS_A; t++) {
                stash_lhs(ac[t], ra[t], LHS_K_FAST);
            }
            for (var t = 0u; t < LOADS_B; t++) {
                stash_rhs(bc[t], rb[t], RHS_N_FAST);
            }
        }
        workgroupBarrier();
    }
}

// Writes accumulator block (r0, c0) of the output: straight from the fragment where `interior`,
// through this subgroup's slot of `edge` element by element otherwise.
fn store_block(acc: coop_mat16x16<f32, C>, r0: u32, c0: u32, warp: u32, lane: u32, interior: bool) {
    // Index and stride are bound first: naga 30's SPIR-V writer misses expressions that appear
    // only inside coopStore's arguments.
    let at = out_block(r0, c0);
    let stride = out_stride();
    let slot = warp * 256u;
    let block = 16u;
    if interior {
        coopStoreT(acc, &out[at], stride);
        return;
    }
    coopStoreT(acc, &edge[slot], block);
    // Only this subgroup's own slot is involved; WGSL has no subgroup-scoped barrier for
    // workgroup memory, and every subgroup reaches this one equally often.
    workgroupBarrier();
    for (var i = lane; i < 256u; i += 32u) {
        out_put(r0 + i / 16u, c0 + i % 16u, edge[slot + i]);
    }
    workgroupBarrier();
}

// Stores the tile at (row0, col0). `interior` (uniform over the workgroup, so every subgroup
// takes the same branches in store_block) says that each of its 16×16 blocks lies inside the
// output at `out_stride` from `out_block`.
fn store_tile(row0: u32, col0: u32, lid: u32, interior: bool) {
    let lane = lid % 32u;
    let warp = lid / 32u;
    let r = row0 + (warp / 4u) * 64u;
    let c = col0 + (warp % 4u) * 64u;
    store_block(acc00, r + 0u, c + 0u, warp, lane, interior);
    store_block(acc01, r + 0u, c + 16u, warp, lane, interior);
    store_block(acc02, r + 0u, c + 32u, warp, lane, interior);
    store_block(acc03, r + 0u, c + 48u, warp, lane, interior);
    store_block(acc10, r + 16u, c + 0u, warp, lane, interior);
    store_block(acc11, r + 16u, c + 16u, warp, lane, interior);
    store_block(acc12, r + 16u, c + 32u, warp, lane, interior);
    store_block(acc13, r + 16u, c + 48u, warp, lane, interior);
    store_block(acc20, r + 32u, c + 0u, warp, lane, interior);
    store_block(acc21, r + 32u, c + 16u, warp, lane, interior);
    store_block(acc22, r + 32u, c + 32u, warp, lane, interior);
    store_block(acc23, r + 32u, c + 48u, warp, lane, interior);
    store_block(acc30, r + 48u, c + 0u, warp, lane, interior);
    store_block(acc31, r + 48u, c + 16u, warp, lane, interior);
    store_block(acc32, r + 48u, c + 32u, warp, lane, interior);
    store_block(acc33, r + 48u, c + 48u, warp, lane, interior);
}
