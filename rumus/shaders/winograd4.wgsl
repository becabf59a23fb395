// Winograd F(4×4, 3×3) convolution (Lavin & Gray; interpolation points 0, ±1, ±2 and ∞): the
// transforms around 36 batched GEMMs that the backend's matmul kernels compute (see
// `winograd.rs`). Against F(2×2, 3×3) (`winograd.wgsl`) it multiplies 2.25 instead of 4 times
// per output and moves 2.25 instead of 4 transformed values per output through memory, at the
// price of a 6×6 input tile per 4×4 output tile and larger rounding (the matrices' entries reach
// 8 and 1/24). With
//
//   Bᵀ = [4  0 -5  0  1  0]   G = [ 1/4     0     0  ]   Aᵀ = [1  1  1  1  1  0]
//        [0 -4 -4  1  1  0]       [-1/6  -1/6  -1/6 ]        [0  1 -1  2 -2  0]
//        [0  4 -4 -1  1  0]       [-1/6   1/6  -1/6 ]        [0  1  1  4  4  0]
//        [0 -2 -1  2  1  0]       [1/24  1/12   1/6 ]        [0  1 -1  8 -8  1]
//        [0  2 -1 -2  1  0]       [1/24 -1/12   1/6 ]
//        [0  4  0 -5  0  1]       [  0     0     1  ]
//
// a 4×4 output tile (ty, tx) reads the 6×6 input tile d starting at (4·ty − pad_h, 4·tx − pad_w),
// zeros outside the image, and ξ = 6·i + j runs over the 36 transformed positions. The entry
// points are `winograd.wgsl`'s, with 36 planes instead of 16 (the transforms themselves:
// lib/winograd4_transforms.wgsl, written by tools/gen/winograd4.py):
//
//   winograd_filter       U[ξ, o, c]  = (G g Gᵀ)ξ of the 3×3 filter g = w[o, c] (or, with
//                         `flip`, w[c, o] rotated 180°: the input gradient's filter)
//   winograd_input        V[ξ, c, p]  = (Bᵀ d B)ξ of tile p of channel c
//   (matmul)              M[ξ]        = U[ξ] @ V[ξ]
//   winograd_output       y[n, o, tile p] = Aᵀ M[·, o, p] A + bias[o], inside out_h × out_w
//   winograd_input_wgrad  Vt[ξ, p, c] = V[ξ, c, p], tile-major for the weight gradient
//   winograd_grad_tiles   Zt[ξ, p, o] = (A dy Aᵀ)ξ of tile p of the output gradient (zeros
//                         beyond out_h × out_w), tile-major
//   (matmul, sum)         dU[ξ]       = Σ_p Zt[ξ, p, ·]ᵀ Vt[ξ, p, ·]
//   winograd_filter_grad  dw[o, c]    = Gᵀ dU[·, o, c] G
//
// The layout of the tile matrices and what the two Winograd shaders share: lib/winograd_tiles.wgsl.
//
// `winograd_output_vec4` is the output transform for outputs whose rows are a multiple of 4 wide
// (the dispatcher checks): each row of a tile is one aligned vec4 write through `out4`, a view of
// `out` (no entry point uses both), instead of four element writes. (On an H100 it took ResNet-18's
// output transforms from 1.18 to 0.64 ms per step; vec4 tile loads of the input transforms, the
// aligned vec4s around each row's 6 values, were 15 % slower than element loads and were removed:
// docs/BENCHMARKS.md.)
//
// `winograd_input_wgrad_staged` and `winograd_grad_tiles_staged` are the weight gradient's
// tile-major transforms (`winograd_input_wgrad`, `winograd_grad_tiles` of lib/winograd_tiles.wgsl)
// with their stores staged through workgroup memory: a workgroup takes a block of 32 rows × 8
// tiles, each invocation transforms one (8 adjacent tiles of 4 rows per subgroup: the loads stay
// as local as before), and `store_tile_major36` writes each plane of the block 32 rows at a time
// (128 contiguous bytes per subgroup, against 4 runs of 32 bytes).

const TILE: u32 = 4u;

@group(0) @binding(3) var<storage, read_write> out4: array<vec4<f32>>;
// The staged tile-major stores' 9 planes of a workgroup's 8 tiles (slots of 36: 32 rows, padded).
var<workgroup> tm: array<f32, 2592>;

// A tile's 36 transformed values, row-major.
alias Transformed = array<f32, 36>;

// Bᵀ d B of the 6×6 input tile at `o`.
fn transformed_input_tile(o: TileOrigin, h: u32, w: u32) -> Transformed {
    return input_transform4(load_tile6(o, h, w));
}

// A e Aᵀ of the 4×4 output-gradient tile e at `o` (zeros beyond h × w).
fn transformed_grad_tile(o: TileOrigin, h: u32, w: u32) -> Transformed {
    return grad_transform4(load_tile4(o, h, w));
}

fn store_transformed(v: Transformed, at: u32, plane: u32) {
    store_planes36(v, at, plane);
}

@compute @workgroup_size(256)
fn winograd_filter(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let o = i / p.channels;
    let c = i % p.channels;
    let g = array<f32, 9>(
        filter_tap(o, c, 0u, 0u), filter_tap(o, c, 0u, 1u), filter_tap(o, c, 0u, 2u),
        filter_tap(o, c, 1u, 0u), filter_tap(o, c, 1u, 1u), filter_tap(o, c, 1u, 2u),
        filter_tap(o, c, 2u, 0u), filter_tap(o, c, 2u, 1u), filter_tap(o, c, 2u, 2u),
    );
    store_planes36(filter_transform4(g), i, p.out_channels * p.channels);
}

@compute @workgroup_size(256)
fn winograd_output(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let t = output_tile(i);
    let y = output_transform4(load_planes36(t.at, p.out_channels * p.cols));
    store_output4(y, t.bias, t.base, t.y0, t.x0);
}

@compute @workgroup_size(256)
fn winograd_filter_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    // src: dU [36, rows, cols] (O and C rounded up); i = o·C + c.
    let o = i / p.channels;
    let dw = filter_grad_transform4(load_planes36(o * p.cols + i % p.channels, p.rows * p.cols));
    let base = i * 9u;
    out[base] = dw[0];
    out[base + 1u] = dw[1];
    out[base + 2u] = dw[2];
    out[base + 3u] = dw[3];
    out[base + 4u] = dw[4];
    out[base + 5u] = dw[5];
    out[base + 6u] = dw[6];
    out[base + 7u] = dw[7];
    out[base + 8u] = dw[8];
}

@compute @workgroup_size(256)
fn winograd_output_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let t = output_tile(i);
    let y = output_transform4(load_planes36(t.at, p.out_channels * p.cols));
    store_output4_vec4(y, t.bias, t.base, t.y0, t.x0);
}

// Where invocation `lid` of workgroup `w` of a staged tile-major transform works: the first row
// and tile of the workgroup's block of 32 rows × 8 tiles (rows fastest), nothing past the last
// block, and its own element (row0 + lid / 8, tile0 + lid % 8).
struct StagedElement {
    inside: bool,
    row0: u32,
    tile0: u32,
    row: u32,
    tile: u32,
}

fn staged_element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> StagedElement {
    let w = wid.x + wid.y * nwg.x;
    let row_blocks = (p.rows + 31u) / 32u;
    let blocks = row_blocks * ((p.cols + 7u) / 8u);
    let row0 = (w % row_blocks) * 32u;
    let tile0 = (w / row_blocks) * 8u;
    return StagedElement(w < blocks, row0, tile0, row0 + lid / 8u, tile0 + lid % 8u);
}

@compute @workgroup_size(256)
fn winograd_input_wgrad_staged(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                               @builtin(local_invocation_index) lid: u32) {
    let e = staged_element(wid, nwg, lid);
    // Uniform: the whole workgroup leaves, before any barrier.
    if !e.inside {
        return;
    }
    store_tile_major36(wgrad_input_tile(e.row, e.tile), lid, e.row0, e.tile0);
}

@compute @workgroup_size(256)
fn winograd_grad_tiles_staged(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              @builtin(local_invocation_index) lid: u32) {
    let e = staged_element(wid, nwg, lid);
    if !e.inside {
        return;
    }
    store_tile_major36(wgrad_grad_tile(e.row, e.tile), lid, e.row0, e.tile0);
}
