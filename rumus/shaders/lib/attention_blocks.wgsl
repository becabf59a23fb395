// The blocked attention backward kernel (attention_backward_dkdv_blocked.wgsl): a workgroup of
// BLOCK_WG invocations owns BK rows (keys) and streams blocks of BK rows of the other side
// (queries). Each block's BK x BK scores are computed by all invocations (each an SA x SA
// patch), and its probabilities p and score gradients ds are kept in workgroup memory; then each
// invocation accumulates KR of its rows times one vec4 column of the outputs. Rows of the staged blocks are DP = D4 + 1
// vec4s apart (no bank conflicts between rows). Needs lib/attention_tiles.wgsl: about 42 KiB
// of workgroup memory at DMAX = 64 (the launcher gates on the adapter's limit).

const BLOCK_WG: u32 = 256u;
const DP: u32 = D4 + 1u;
// Score patch: SA x SA scores per invocation, rows patch_row(lid) + 16 a, columns
// patch_col(lid) + 16 b.
const SA: u32 = BK / 16u;
// Output rows per invocation (og + KS * a) and the invocations per output column.
const KS: u32 = BLOCK_WG / D4;
const KR: u32 = BK / KS;

// The owned rows (scaled q or k; dout or v) and the streamed block (k or q; v or dout).
var<workgroup> own_a: array<vec4<f32>, BK * DP>;
var<workgroup> own_b: array<vec4<f32>, BK * DP>;
var<workgroup> str_a: array<vec4<f32>, BK * DP>;
var<workgroup> str_b: array<vec4<f32>, BK * DP>;
// p and ds of the block, [owned row][streamed row], 4 streamed rows to a vec4.
var<workgroup> prob: array<vec4<f32>, BK * BK / 4u>;
var<workgroup> dscore: array<vec4<f32>, BK * BK / 4u>;
// Per query: lse in base 2 and delta.
var<workgroup> row_lse: array<f32, BK>;
var<workgroup> row_delta: array<f32, BK>;

// The SA x SA patch of dot products own_a . str_a (s) and own_b . str_b (dp) of invocation lid,
// as partial vec4 sums at index a * SA + b.
struct Patch {
    s: array<vec4<f32>, 4>,
    dp: array<vec4<f32>, 4>,
}

// The first row of invocation lid's patch: a subgroup of 32 covers 4 rows by 8 columns, so that
// its loads of a column of blocks touch few distinct rows.
fn patch_row(lid: u32) -> u32 {
    return (lid / 64u) * 4u + (lid % 32u) / 8u;
}

fn patch_col(lid: u32) -> u32 {
    return ((lid / 32u) % 2u) * 8u + lid % 8u;
}

// Sets element [r][c] of a BK x BK block stored as vec4s.
fn put_prob(r: u32, c: u32, x: f32) {
    prob[(r * BK + c) / 4u][c % 4u] = x;
}

fn put_dscore(r: u32, c: u32, x: f32) {
    dscore[(r * BK + c) / 4u][c % 4u] = x;
}

fn score_patch(lid: u32) -> Patch {
    var r: Patch;
    let ro = patch_row(lid);
    let co = patch_col(lid);
    for (var c = 0u; c < D4; c++) {
        var oa: array<vec4<f32>, SA>;
        var ob: array<vec4<f32>, SA>;
        for (var a = 0u; a < SA; a++) {
            oa[a] = own_a[(ro + 16u * a) * DP + c];
            ob[a] = own_b[(ro + 16u * a) * DP + c];
        }
        for (var bb = 0u; bb < SA; bb++) {
            let sa = str_a[(co + 16u * bb) * DP + c];
            let sb = str_b[(co + 16u * bb) * DP + c];
            for (var a = 0u; a < SA; a++) {
                r.s[a * SA + bb] = fma(oa[a], sa, r.s[a * SA + bb]);
                r.dp[a * SA + bb] = fma(ob[a], sb, r.dp[a * SA + bb]);
            }
        }
    }
    return r;
}

// The index of row `r`, vec4 column `c` of a staged block.
fn block_index(r: u32, c: u32) -> u32 {
    return r * DP + c;
}

// Owned row `a` (of KR) of the invocations of output row group `og` = lid / D4.
fn out_row(og: u32, a: u32) -> u32 {
    return og + KS * a;
}
