// Batched matmul out[b] = lhs[b] (m×k) @ rhs[b] (k×n) with arbitrary element strides, so
// transposed and batch-broadcast operands need no copy. Output is contiguous [batch, m, n].
//
// `matmul_small` (below) gives each output its own invocation, for products with a short side.
// Two tile sizes share one scheme: `matmul` computes a 64×64 tile per workgroup (4×4 per
// invocation) for small and medium products; `matmul_large` a 128×128 tile (8×8 per invocation,
// four 4×4 blocks 64 apart) for big ones. A 16×16 workgroup stages K in slices of 16 through
// shared memory; each invocation reads its rows and columns as vec4s, so one k step is a few
// vec4 loads feeding 4 (or 16) vec4 FMAs. Shared rows are padded by one vec4 so the transposing
// stores of row-major lhs tiles spread over the banks. Tile loads pick the thread mapping that
// makes global reads contiguous for row-major or transposed operands. Register blocks are
// written out with constant indices (no loops over them) so they stay in registers.
// Workgroup ids walk tiles and batches with grid strides, so no dispatch dimension limit applies.

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
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const BK: u32 = 16u;

// Element (r, gk) of batch entry `base` of lhs, zero outside the matrix.
fn lhs_at(base: u32, r: u32, gk: u32) -> f32 {
    if r < p.m && gk < p.k {
        return lhs[base + r * p.lhs_row + gk * p.lhs_col];
    }
    return 0.0;
}

fn rhs_at(base: u32, gk: u32, c: u32) -> f32 {
    if c < p.n && gk < p.k {
        return rhs[base + gk * p.rhs_row + c * p.rhs_col];
    }
    return 0.0;
}

// Writes 4 consecutive outputs of row r from column c0, skipping those outside the matrix.
fn store4(base: u32, r: u32, c0: u32, v: vec4<f32>) {
    if r >= p.m {
        return;
    }
    let at = base + r * p.n + c0;
    if c0 + 3u < p.n {
        out[at] = v.x;
        out[at + 1u] = v.y;
        out[at + 2u] = v.z;
        out[at + 3u] = v.w;
    } else {
        for (var j = 0u; j < 4u; j++) {
            if c0 + j < p.n {
                out[at + j] = v[j];
            }
        }
    }
}

// ----- matmul: 64×64 tile, 4×4 per invocation -----

const STILE: u32 = 64u;
const SROW: u32 = 17u;

var<workgroup> sa: array<vec4<f32>, 272>;
var<workgroup> sb: array<vec4<f32>, 272>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) local: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tx = local.x;
    let ty = local.y;
    let tiles_n = (p.n + STILE - 1u) / STILE;
    let tiles_m = (p.m + STILE - 1u) / STILE;
    // lhs: k fastest when its columns are contiguous, rows fastest otherwise (transposed).
    let lhs_k_fast = p.lhs_col == 1u;
    let rhs_n_fast = p.rhs_col == 1u || p.rhs_row != 1u;
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        let lhs_base = p.lhs_offset + b * p.lhs_batch;
        let rhs_base = p.rhs_offset + b * p.rhs_batch;
        let out_base = b * p.m * p.n;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * STILE;
                let col0 = tn * STILE;
                var acc0 = vec4<f32>(0.0);
                var acc1 = vec4<f32>(0.0);
                var acc2 = vec4<f32>(0.0);
                var acc3 = vec4<f32>(0.0);
                for (var k0 = 0u; k0 < p.k; k0 += BK) {
                    for (var t = 0u; t < 4u; t++) {
                        let idx = lid + t * 256u;
                        var r = idx % STILE;
                        var kk = idx / STILE;
                        if lhs_k_fast {
                            r = idx / BK;
                            kk = idx % BK;
                        }
                        sa[kk * SROW + r / 4u][r % 4u] = lhs_at(lhs_base, row0 + r, k0 + kk);
                        var c = idx % STILE;
                        var kc = idx / STILE;
                        if !rhs_n_fast {
                            c = idx / BK;
                            kc = idx % BK;
                        }
                        sb[kc * SROW + c / 4u][c % 4u] = rhs_at(rhs_base, k0 + kc, col0 + c);
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < BK; kk++) {
                        let a0 = sa[kk * SROW + 0u + ty];
                        let b0 = sb[kk * SROW + 0u + tx];
                        acc0 = fma(vec4<f32>(a0.x), b0, acc0);
                        acc1 = fma(vec4<f32>(a0.y), b0, acc1);
                        acc2 = fma(vec4<f32>(a0.z), b0, acc2);
                        acc3 = fma(vec4<f32>(a0.w), b0, acc3);
                    }
                    workgroupBarrier();
                }
                store4(out_base, row0 + 0u + ty * 4u, col0 + 0u + tx * 4u, acc0);
                store4(out_base, row0 + 1u + ty * 4u, col0 + 0u + tx * 4u, acc1);
                store4(out_base, row0 + 2u + ty * 4u, col0 + 0u + tx * 4u, acc2);
                store4(out_base, row0 + 3u + ty * 4u, col0 + 0u + tx * 4u, acc3);
            }
        }
    }
}

// ----- matmul_large: 128×128 tile, 8×8 per invocation -----

const LTILE: u32 = 128u;
const LROW: u32 = 33u;

var<workgroup> la: array<vec4<f32>, 528>;
var<workgroup> lb: array<vec4<f32>, 528>;

@compute @workgroup_size(16, 16)
fn matmul_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) local: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tx = local.x;
    let ty = local.y;
    let tiles_n = (p.n + LTILE - 1u) / LTILE;
    let tiles_m = (p.m + LTILE - 1u) / LTILE;
    // lhs: k fastest when its columns are contiguous, rows fastest otherwise (transposed).
    let lhs_k_fast = p.lhs_col == 1u;
    let rhs_n_fast = p.rhs_col == 1u || p.rhs_row != 1u;
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        let lhs_base = p.lhs_offset + b * p.lhs_batch;
        let rhs_base = p.rhs_offset + b * p.rhs_batch;
        let out_base = b * p.m * p.n;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * LTILE;
                let col0 = tn * LTILE;
                var acc0 = vec4<f32>(0.0);
                var acc1 = vec4<f32>(0.0);
                var acc2 = vec4<f32>(0.0);
                var acc3 = vec4<f32>(0.0);
                var acc4 = vec4<f32>(0.0);
                var acc5 = vec4<f32>(0.0);
                var acc6 = vec4<f32>(0.0);
                var acc7 = vec4<f32>(0.0);
                var acc8 = vec4<f32>(0.0);
                var acc9 = vec4<f32>(0.0);
                var acc10 = vec4<f32>(0.0);
                var acc11 = vec4<f32>(0.0);
                var acc12 = vec4<f32>(0.0);
                var acc13 = vec4<f32>(0.0);
                var acc14 = vec4<f32>(0.0);
                var acc15 = vec4<f32>(0.0);
                for (var k0 = 0u; k0 < p.k; k0 += BK) {
                    for (var t = 0u; t < 8u; t++) {
                        let idx = lid + t * 256u;
                        var r = idx % LTILE;
                        var kk = idx / LTILE;
                        if lhs_k_fast {
                            r = idx / BK;
                            kk = idx % BK;
                        }
                        la[kk * LROW + r / 4u][r % 4u] = lhs_at(lhs_base, row0 + r, k0 + kk);
                        var c = idx % LTILE;
                        var kc = idx / LTILE;
                        if !rhs_n_fast {
                            c = idx / BK;
                            kc = idx % BK;
                        }
                        lb[kc * LROW + c / 4u][c % 4u] = rhs_at(rhs_base, k0 + kc, col0 + c);
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < BK; kk++) {
                        let a0 = la[kk * LROW + 0u + ty];
                        let a1 = la[kk * LROW + 16u + ty];
                        let b0 = lb[kk * LROW + 0u + tx];
                        let b1 = lb[kk * LROW + 16u + tx];
                        acc0 = fma(vec4<f32>(a0.x), b0, acc0);
                        acc1 = fma(vec4<f32>(a0.x), b1, acc1);
                        acc2 = fma(vec4<f32>(a0.y), b0, acc2);
                        acc3 = fma(vec4<f32>(a0.y), b1, acc3);
                        acc4 = fma(vec4<f32>(a0.z), b0, acc4);
                        acc5 = fma(vec4<f32>(a0.z), b1, acc5);
                        acc6 = fma(vec4<f32>(a0.w), b0, acc6);
                        acc7 = fma(vec4<f32>(a0.w), b1, acc7);
                        acc8 = fma(vec4<f32>(a1.x), b0, acc8);
                        acc9 = fma(vec4<f32>(a1.x), b1, acc9);
                        acc10 = fma(vec4<f32>(a1.y), b0, acc10);
                        acc11 = fma(vec4<f32>(a1.y), b1, acc11);
                        acc12 = fma(vec4<f32>(a1.z), b0, acc12);
                        acc13 = fma(vec4<f32>(a1.z), b1, acc13);
                        acc14 = fma(vec4<f32>(a1.w), b0, acc14);
                        acc15 = fma(vec4<f32>(a1.w), b1, acc15);
                    }
                    workgroupBarrier();
                }
                store4(out_base, row0 + 0u + ty * 4u, col0 + 0u + tx * 4u, acc0);
                store4(out_base, row0 + 0u + ty * 4u, col0 + 64u + tx * 4u, acc1);
                store4(out_base, row0 + 1u + ty * 4u, col0 + 0u + tx * 4u, acc2);
                store4(out_base, row0 + 1u + ty * 4u, col0 + 64u + tx * 4u, acc3);
                store4(out_base, row0 + 2u + ty * 4u, col0 + 0u + tx * 4u, acc4);
                store4(out_base, row0 + 2u + ty * 4u, col0 + 64u + tx * 4u, acc5);
                store4(out_base, row0 + 3u + ty * 4u, col0 + 0u + tx * 4u, acc6);
                store4(out_base, row0 + 3u + ty * 4u, col0 + 64u + tx * 4u, acc7);
                store4(out_base, row0 + 64u + ty * 4u, col0 + 0u + tx * 4u, acc8);
                store4(out_base, row0 + 64u + ty * 4u, col0 + 64u + tx * 4u, acc9);
                store4(out_base, row0 + 65u + ty * 4u, col0 + 0u + tx * 4u, acc10);
                store4(out_base, row0 + 65u + ty * 4u, col0 + 64u + tx * 4u, acc11);
                store4(out_base, row0 + 66u + ty * 4u, col0 + 0u + tx * 4u, acc12);
                store4(out_base, row0 + 66u + ty * 4u, col0 + 64u + tx * 4u, acc13);
                store4(out_base, row0 + 67u + ty * 4u, col0 + 0u + tx * 4u, acc14);
                store4(out_base, row0 + 67u + ty * 4u, col0 + 64u + tx * 4u, acc15);
            }
        }
    }
}

// ----- matmul_small: one invocation per output -----
// For products with a side under 16, where a tile would mostly idle (classifier heads,
// per-head attention on tiny shapes, many tiny batched products). Any batch size works: the
// outputs are numbered linearly over a 2-D dispatch.

@compute @workgroup_size(256)
fn matmul_small(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.batch * p.m * p.n {
        return;
    }
    let c = i % p.n;
    let r = (i / p.n) % p.m;
    let b = i / (p.m * p.n);
    let a0 = p.lhs_offset + b * p.lhs_batch + r * p.lhs_row;
    let b0 = p.rhs_offset + b * p.rhs_batch + c * p.rhs_col;
    var acc = 0.0;
    for (var kk = 0u; kk < p.k; kk++) {
        acc = fma(lhs[a0 + kk * p.lhs_col], rhs[b0 + kk * p.rhs_row], acc);
    }
    out[i] = acc;
}
