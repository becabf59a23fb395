// Batched matmul out[b] = lhs[b] (m×k) @ rhs[b] (k×n) with arbitrary element strides, so
// transposed and batch-broadcast operands need no copy. Output is contiguous [batch, m, n].
//
// `matmul` (small and medium products) — tiling: a 256-invocation workgroup computes a 64×64 output tile; each invocation holds a 4×4
// block in registers (rows ty+16i, cols tx+16j, so shared-memory reads are conflict-free and
// output writes coalesce). K advances in slices of 16 staged through shared memory. Tile loads
// pick the thread mapping that makes global reads contiguous for row-major or transposed operands.
// Workgroup ids walk tiles and batches with grid strides, so no dimension limit applies.

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

const TILE: u32 = 64u;
const BK: u32 = 16u;

// a_tile[kk * TILE + r], b_tile[kk * TILE + c]
var<workgroup> a_tile: array<f32, 1024>;
var<workgroup> b_tile: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) local: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tx = local.x;
    let ty = local.y;
    let tiles_n = (p.n + TILE - 1u) / TILE;
    let tiles_m = (p.m + TILE - 1u) / TILE;
    // lhs: k fastest when its columns are contiguous, rows fastest otherwise (transposed).
    let lhs_k_fast = p.lhs_col == 1u;
    let rhs_n_fast = p.rhs_col == 1u || p.rhs_row != 1u;
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        let lhs_base = p.lhs_offset + b * p.lhs_batch;
        let rhs_base = p.rhs_offset + b * p.rhs_batch;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * TILE;
                let col0 = tn * TILE;
                var acc: array<array<f32, 4>, 4>;
                for (var i = 0u; i < 4u; i++) {
                    for (var j = 0u; j < 4u; j++) {
                        acc[i][j] = 0.0;
                    }
                }
                for (var k0 = 0u; k0 < p.k; k0 += BK) {
                    for (var t = 0u; t < 4u; t++) {
                        let idx = lid + t * 256u;
                        var r: u32;
                        var kk: u32;
                        if lhs_k_fast {
                            r = idx / BK;
                            kk = idx % BK;
                        } else {
                            r = idx % TILE;
                            kk = idx / TILE;
                        }
                        let gr = row0 + r;
                        let gk = k0 + kk;
                        var v = 0.0;
                        if gr < p.m && gk < p.k {
                            v = lhs[lhs_base + gr * p.lhs_row + gk * p.lhs_col];
                        }
                        a_tile[kk * TILE + r] = v;
                    }
                    for (var t = 0u; t < 4u; t++) {
                        let idx = lid + t * 256u;
                        var c: u32;
                        var kk: u32;
                        if rhs_n_fast {
                            c = idx % TILE;
                            kk = idx / TILE;
                        } else {
                            c = idx / BK;
                            kk = idx % BK;
                        }
                        let gc = col0 + c;
                        let gk = k0 + kk;
                        var v = 0.0;
                        if gc < p.n && gk < p.k {
                            v = rhs[rhs_base + gk * p.rhs_row + gc * p.rhs_col];
                        }
                        b_tile[kk * TILE + c] = v;
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < BK; kk++) {
                        var a: array<f32, 4>;
                        var bv: array<f32, 4>;
                        for (var i = 0u; i < 4u; i++) {
                            a[i] = a_tile[kk * TILE + ty + 16u * i];
                            bv[i] = b_tile[kk * TILE + tx + 16u * i];
                        }
                        for (var i = 0u; i < 4u; i++) {
                            for (var j = 0u; j < 4u; j++) {
                                acc[i][j] = fma(a[i], bv[j], acc[i][j]);
                            }
                        }
                    }
                    workgroupBarrier();
                }
                let out_base = b * p.m * p.n;
                for (var i = 0u; i < 4u; i++) {
                    let r = row0 + ty + 16u * i;
                    for (var j = 0u; j < 4u; j++) {
                        let c = col0 + tx + 16u * j;
                        if r < p.m && c < p.n {
                            out[out_base + r * p.n + c] = acc[i][j];
                        }
                    }
                }
            }
        }
    }
}

// ----- large tiles: 128×128 per workgroup, 8×8 per invocation -----
// For big products. Each invocation owns rows {ty*4+i, 64+ty*4+i} and columns {tx*4+j, 64+tx*4+j}
// (i, j < 4), read from shared memory as vec4s, so one k step is 4 vec4 loads for 16 vec4 FMAs.
// Shared rows are padded by one vec4 so the transposing stores of row-major lhs tiles spread
// over the banks.

const L_TILE: u32 = 128u;
const L_BK: u32 = 16u;
// vec4s per shared row (32 + 1 of padding)
const L_ROW: u32 = 33u;

var<workgroup> la: array<vec4<f32>, 528>;
var<workgroup> lb: array<vec4<f32>, 528>;

@compute @workgroup_size(16, 16)
fn matmul_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_id) local: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tx = local.x;
    let ty = local.y;
    let tiles_n = (p.n + L_TILE - 1u) / L_TILE;
    let tiles_m = (p.m + L_TILE - 1u) / L_TILE;
    let lhs_k_fast = p.lhs_col == 1u;
    let rhs_n_fast = p.rhs_col == 1u || p.rhs_row != 1u;
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        let lhs_base = p.lhs_offset + b * p.lhs_batch;
        let rhs_base = p.rhs_offset + b * p.rhs_batch;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * L_TILE;
                let col0 = tn * L_TILE;
                var acc: array<vec4<f32>, 16>;
                for (var i = 0u; i < 16u; i++) {
                    acc[i] = vec4<f32>(0.0);
                }
                for (var k0 = 0u; k0 < p.k; k0 += L_BK) {
                    for (var t = 0u; t < 8u; t++) {
                        let idx = lid + t * 256u;
                        var r: u32;
                        var kk: u32;
                        if lhs_k_fast {
                            r = idx / L_BK;
                            kk = idx % L_BK;
                        } else {
                            r = idx % L_TILE;
                            kk = idx / L_TILE;
                        }
                        let gr = row0 + r;
                        let gk = k0 + kk;
                        var v = 0.0;
                        if gr < p.m && gk < p.k {
                            v = lhs[lhs_base + gr * p.lhs_row + gk * p.lhs_col];
                        }
                        la[kk * L_ROW + r / 4u][r % 4u] = v;
                    }
                    for (var t = 0u; t < 8u; t++) {
                        let idx = lid + t * 256u;
                        var c: u32;
                        var kk: u32;
                        if rhs_n_fast {
                            c = idx % L_TILE;
                            kk = idx / L_TILE;
                        } else {
                            c = idx / L_BK;
                            kk = idx % L_BK;
                        }
                        let gc = col0 + c;
                        let gk = k0 + kk;
                        var v = 0.0;
                        if gc < p.n && gk < p.k {
                            v = rhs[rhs_base + gk * p.rhs_row + gc * p.rhs_col];
                        }
                        lb[kk * L_ROW + c / 4u][c % 4u] = v;
                    }
                    workgroupBarrier();
                    for (var kk = 0u; kk < L_BK; kk++) {
                        let a0 = la[kk * L_ROW + ty];
                        let a1 = la[kk * L_ROW + 16u + ty];
                        let b0 = lb[kk * L_ROW + tx];
                        let b1 = lb[kk * L_ROW + 16u + tx];
                        acc[0] = fma(vec4<f32>(a0.x), b0, acc[0]);
                        acc[1] = fma(vec4<f32>(a0.x), b1, acc[1]);
                        acc[8] = fma(vec4<f32>(a1.x), b0, acc[8]);
                        acc[9] = fma(vec4<f32>(a1.x), b1, acc[9]);
                        acc[2] = fma(vec4<f32>(a0.y), b0, acc[2]);
                        acc[3] = fma(vec4<f32>(a0.y), b1, acc[3]);
                        acc[10] = fma(vec4<f32>(a1.y), b0, acc[10]);
                        acc[11] = fma(vec4<f32>(a1.y), b1, acc[11]);
                        acc[4] = fma(vec4<f32>(a0.z), b0, acc[4]);
                        acc[5] = fma(vec4<f32>(a0.z), b1, acc[5]);
                        acc[12] = fma(vec4<f32>(a1.z), b0, acc[12]);
                        acc[13] = fma(vec4<f32>(a1.z), b1, acc[13]);
                        acc[6] = fma(vec4<f32>(a0.w), b0, acc[6]);
                        acc[7] = fma(vec4<f32>(a0.w), b1, acc[7]);
                        acc[14] = fma(vec4<f32>(a1.w), b0, acc[14]);
                        acc[15] = fma(vec4<f32>(a1.w), b1, acc[15]);
                    }
                    workgroupBarrier();
                }
                let out_base = b * p.m * p.n;
                for (var half_r = 0u; half_r < 2u; half_r++) {
                    for (var i = 0u; i < 4u; i++) {
                        let r = row0 + half_r * 64u + ty * 4u + i;
                        if r >= p.m {
                            continue;
                        }
                        for (var half_c = 0u; half_c < 2u; half_c++) {
                            let v = acc[half_r * 8u + i * 2u + half_c];
                            let c0 = col0 + half_c * 64u + tx * 4u;
                            for (var j = 0u; j < 4u; j++) {
                                if c0 + j < p.n {
                                    out[out_base + r * p.n + c0 + j] = v[j];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
