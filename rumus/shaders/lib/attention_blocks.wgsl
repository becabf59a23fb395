// The blocked attention backward kernel (attention_backward_dkdv_blocked.wgsl): a workgroup of
// BLOCK_WG invocations owns BK = 32 rows (keys) and streams blocks of BK rows of the other side
// (queries). Each block's BK x BK scores are computed by all invocations (each a 2 x 2 patch),
// and its probabilities p and score gradients ds are kept in workgroup memory; then each
// invocation accumulates 2 of its rows times one vec4 column of the outputs (columns past D4
// idle). Rows of the staged blocks are DP = D4 + 1 vec4s apart (no bank conflicts between
// rows). Needs lib/attention_tiles.wgsl with BK = 32 and D4 <= 16: about 42 KiB of workgroup
// memory at DMAX = 64 (the launcher gates on the adapter's limit).

const BLOCK_WG: u32 = 256u;
const DP: u32 = D4 + 1u;

// The owned rows (scaled k; v) and the streamed block (q; dout).
var<workgroup> own_a: array<vec4<f32>, BK * DP>;
var<workgroup> own_b: array<vec4<f32>, BK * DP>;
var<workgroup> str_a: array<vec4<f32>, BK * DP>;
var<workgroup> str_b: array<vec4<f32>, BK * DP>;
// p and ds of the block, [owned row][streamed row], 4 streamed rows to a vec4.
var<workgroup> prob: array<vec4<f32>, BK * BK / 4u>;
var<workgroup> dscore: array<vec4<f32>, BK * BK / 4u>;
// Per streamed row: lse in base 2 and delta.
var<workgroup> row_lse: array<f32, BK>;
var<workgroup> row_delta: array<f32, BK>;

// The 2 x 2 patch of dot products own_a . str_a (s) and own_b . str_b (dp) of an invocation
// (rows r, r + 16 by columns c, c + 16), as partial vec4 sums.
struct Patch {
    s00: vec4<f32>,
    s01: vec4<f32>,
    s10: vec4<f32>,
    s11: vec4<f32>,
    d00: vec4<f32>,
    d01: vec4<f32>,
    d10: vec4<f32>,
    d11: vec4<f32>,
}

// The first row of invocation lid's patch: a subgroup of 32 covers 4 rows by 8 columns, so that
// its loads of a column of blocks touch few distinct rows.
fn patch_row(lid: u32) -> u32 {
    return (lid / 64u) * 4u + (lid % 32u) / 8u;
}

fn patch_col(lid: u32) -> u32 {
    return ((lid / 32u) % 2u) * 8u + lid % 8u;
}

// The index of row `r`, vec4 column `c` of a staged block.
fn block_index(r: u32, c: u32) -> u32 {
    return r * DP + c;
}

// Sets element [r][c] of a BK x BK block stored as vec4s.
fn put_prob(r: u32, c: u32, x: f32) {
    prob[(r * BK + c) / 4u][c % 4u] = x;
}

fn put_dscore(r: u32, c: u32, x: f32) {
    dscore[(r * BK + c) / 4u][c % 4u] = x;
}

fn score_patch(r: u32, c: u32) -> Patch {
    var x: Patch;
    for (var k = 0u; k < D4; k++) {
        let a0 = own_a[block_index(r, k)];
        let a1 = own_a[block_index(r + 16u, k)];
        let b0 = own_b[block_index(r, k)];
        let b1 = own_b[block_index(r + 16u, k)];
        let u0 = str_a[block_index(c, k)];
        let u1 = str_a[block_index(c + 16u, k)];
        let w0 = str_b[block_index(c, k)];
        let w1 = str_b[block_index(c + 16u, k)];
        x.s00 = fma(a0, u0, x.s00);
        x.s01 = fma(a0, u1, x.s01);
        x.s10 = fma(a1, u0, x.s10);
        x.s11 = fma(a1, u1, x.s11);
        x.d00 = fma(b0, w0, x.d00);
        x.d01 = fma(b0, w1, x.d01);
        x.d10 = fma(b1, w0, x.d10);
        x.d11 = fma(b1, w1, x.d11);
    }
    return x;
}
