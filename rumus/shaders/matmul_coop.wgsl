// Batched matmul on tensor cores (the experimental cooperative-matrix feature), with f16 inputs
// and f32 accumulation: the opt-in reduced-precision path, like PyTorch's allow_tf32 (f16 has
// TF32's 10-bit mantissa, but only a 5-bit exponent: magnitudes past 65504 overflow).
// Same parameters and output as `matmul.wgsl`, for the operands `matmul_vec4.wgsl` takes
// (contiguous side, offsets and strides multiples of 4; the dispatcher checks), read as vec4s
// along their contiguous side: each module is compiled for one pair of sides (`LHS_K_FAST`,
// `RHS_N_FAST`: `coop_tiles.rs`). The 128×256 tiles are lib/coop_tiles.wgsl's.

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

// The current product's first element of each operand and of the output.
var<private> lhs_base: u32;
var<private> rhs_base: u32;
var<private> out_base: u32;

// The 4 elements of lhs from (r, k) along its contiguous side, zero outside the matrix
// (alignment makes every vector wholly inside or wholly outside).
fn lhs_fetch(t: u32, r: u32, k: u32) -> vec4<f32> {
    if r < p.m && k < p.k {
        return lhs[(lhs_base + r * p.lhs_row + k * p.lhs_col) / 4u];
    }
    return vec4<f32>(0.0);
}

fn rhs_fetch(t: u32, k: u32, c: u32) -> vec4<f32> {
    if c < p.n && k < p.k {
        return rhs[(rhs_base + k * p.rhs_row + c * p.rhs_col) / 4u];
    }
    return vec4<f32>(0.0);
}

fn begin_slice(k0: u32, lid: u32) {}

fn seeds_rows() -> bool {
    return false;
}

fn row_seed(r: u32) -> f32 {
    return 0.0;
}

fn out_block(r: u32, c: u32) -> u32 {
    return out_base + r * p.n + c;
}

fn out_stride() -> u32 {
    return p.n;
}

fn out_put(r: u32, c: u32, v: f32) {
    if r < p.m && c < p.n {
        out[out_block(r, c)] = v;
    }
}

@compute @workgroup_size(256)
fn matmul_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let tiles_n = (p.n + LTILE_N - 1u) / LTILE_N;
    let tiles_m = (p.m + LTILE_M - 1u) / LTILE_M;
    for (var b = wid.z; b < p.batch; b += nwg.z) {
        lhs_base = p.lhs_offset + b * p.lhs_batch;
        rhs_base = p.rhs_offset + b * p.rhs_batch;
        out_base = b * p.m * p.n;
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * LTILE_M;
                let col0 = tn * LTILE_N;
                multiply_tile(row0, col0, 0u, p.k, lid);
                // Workgroup-uniform, so every subgroup takes the same branch in store_block.
                let interior = row0 + LTILE_M <= p.m && col0 + LTILE_N <= p.n;
                store_tile(row0, col0, lid, interior);
            }
        }
    }
}
