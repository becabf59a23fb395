// Winograd F(2×2, 3×3) convolution (Lavin & Gray): the transforms around 16 batched GEMMs that
// the backend's matmul kernels compute (see `winograd.rs`). With the standard matrices
//
//   Bᵀ = [1  0 -1  0]   G = [ 1    0    0 ]   Aᵀ = [1  1  1  0]
//        [0  1  1  0]       [1/2  1/2  1/2]        [0  1 -1 -1]
//        [0 -1  1  0]       [1/2 -1/2  1/2]
//        [0  1  0 -1]       [ 0    0    1 ]
//
// a 2×2 output tile (ty, tx) reads the 4×4 input tile d starting at (2·ty − pad_h, 2·tx − pad_w),
// zeros outside the image, and ξ = 4·i + j runs over the 16 transformed positions:
//
//   winograd_filter       U[ξ, o, c]  = (G g Gᵀ)ξ of the 3×3 filter g = w[o, c] (or, with
//                         `flip`, w[c, o] rotated 180°: the input gradient's filter)
//   winograd_input        V[ξ, c, p]  = (Bᵀ d B)ξ of tile p of channel c
//   (matmul)              M[ξ]        = U[ξ] @ V[ξ]
//   winograd_output       y[n, o, tile p] = Aᵀ M[·, o, p] A + bias[o], inside out_h × out_w
//   winograd_grad_tiles   Z[ξ, o, p]  = (A dy Aᵀ)ξ of tile p of the output gradient (zeros
//                         beyond out_h × out_w)
//   (matmul, sum)         dU[ξ]       = Σ_p Z[ξ, ·, p] V[ξ, ·, p]ᵀ
//   winograd_filter_grad  dw[o, c]    = Gᵀ dU[·, o, c] G
//
// Tiles are numbered p = (n·tiles_h + ty)·tiles_w + tx, P = batch·tiles_h·tiles_w of them. The
// tile matrices V and Z are laid out [ξ, slice, row, slice_len] with p = slice·slice_len + q:
// each of the `slices` pieces of P is a contiguous [rows, slice_len] block, so the weight
// gradient's product over P splits into a batch of 16·slices products whose partial sums the
// backend's reduction adds up. Columns p ≥ P are written as zeros. M is [ξ, o, cols] with
// cols = slices·slice_len. One invocation per (row, p) or per (o, c), on a 2-D grid of 256-wide
// workgroups; the host checks every index below 2^31.

struct Params {
    // Invocations of this dispatch.
    n: u32,
    batch: u32,
    // Input channels C and output channels O of the convolution the forward computes.
    channels: u32,
    out_channels: u32,
    in_h: u32,
    in_w: u32,
    out_h: u32,
    out_w: u32,
    pad_h: u32,
    pad_w: u32,
    tiles_h: u32,
    tiles_w: u32,
    // Rows of the tile matrix this dispatch writes or reads (C for V, O for Z and M).
    rows: u32,
    slice_len: u32,
    // slices·slice_len.
    cols: u32,
    // The filter transform reads w[c, o] rotated by 180° instead of w[o, c].
    flip: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn invocation(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid;
}

// Where element (row, q-th column of slice s) of a tile matrix stands, for ξ = 0: the caller adds
// ξ·rows·cols. The invocation index i = (s·rows + row)·slice_len + q is exactly that, so it is
// returned as is; this decomposes it.
struct TileColumn {
    row: u32,
    // The tile p, or P and beyond for the zero padding of the last slice.
    tile: u32,
}

fn tile_column(i: u32) -> TileColumn {
    let q = i % p.slice_len;
    let t = i / p.slice_len;
    return TileColumn(t % p.rows, (t / p.rows) * p.slice_len + q);
}

// The 3×3 filter of (o, c) of the convolution computed, read from `src`.
fn filter_tap(o: u32, c: u32, r: u32, s: u32) -> f32 {
    if p.flip != 0u {
        // The forward weight is [C', O', 3, 3] with C' = out_channels here, O' = channels.
        return src[((c * p.out_channels + o) * 3u + 2u - r) * 3u + 2u - s];
    }
    return src[((o * p.channels + c) * 3u + r) * 3u + s];
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
    // G g: 4×3, row by row.
    var gg: array<vec3<f32>, 4>;
    for (var s = 0u; s < 3u; s++) {
        let g0 = filter_tap(o, c, 0u, s);
        let g1 = filter_tap(o, c, 1u, s);
        let g2 = filter_tap(o, c, 2u, s);
        gg[0][s] = g0;
        gg[1][s] = 0.5 * (g0 + g1 + g2);
        gg[2][s] = 0.5 * (g0 - g1 + g2);
        gg[3][s] = g2;
    }
    // (G g) Gᵀ: 4×4.
    let plane = p.out_channels * p.channels;
    for (var r = 0u; r < 4u; r++) {
        let v = gg[r];
        let base = (r * 4u) * plane + i;
        out[base] = v.x;
        out[base + plane] = 0.5 * (v.x + v.y + v.z);
        out[base + 2u * plane] = 0.5 * (v.x - v.y + v.z);
        out[base + 3u * plane] = v.z;
    }
}

// Bᵀ d B of a 4×4 tile, as rows.
fn input_transform(d: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
    // Bᵀ d: rows combined.
    let t0 = d[0] - d[2];
    let t1 = d[1] + d[2];
    let t2 = d[2] - d[1];
    let t3 = d[1] - d[3];
    let t = array<vec4<f32>, 4>(t0, t1, t2, t3);
    // (Bᵀ d) B: the same combination of columns.
    var v: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        let a = t[r];
        v[r] = vec4<f32>(a.x - a.z, a.y + a.z, a.z - a.y, a.y - a.w);
    }
    return v;
}

// The tile of `row`'s plane in `src` [batch, rows, h, w] at tile `tile`, with `pad` rows and
// columns before it, `size` tile entries wide (4 input, 2 output gradient), zeros outside.
fn load_tile(row: u32, tile: u32, h: u32, w: u32, size: u32, step: u32, pad_h: u32, pad_w: u32)
    -> array<vec4<f32>, 4> {
    var d: array<vec4<f32>, 4>;
    let tx = tile % p.tiles_w;
    let ty = (tile / p.tiles_w) % p.tiles_h;
    let b = tile / (p.tiles_w * p.tiles_h);
    let plane = (b * p.rows + row) * h * w;
    // Signed: the tile may start above or left of the image by the padding.
    let y0 = i32(ty * step) - i32(pad_h);
    let x0 = i32(tx * step) - i32(pad_w);
    for (var r = 0u; r < size; r++) {
        let y = y0 + i32(r);
        if y < 0 || y >= i32(h) {
            continue;
        }
        for (var s = 0u; s < size; s++) {
            let x = x0 + i32(s);
            if x >= 0 && x < i32(w) {
                d[r][s] = src[plane + u32(y) * w + u32(x)];
            }
        }
    }
    return d;
}

@compute @workgroup_size(256)
fn winograd_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let at = tile_column(i);
    let plane = p.rows * p.cols;
    if at.tile >= p.batch * p.tiles_h * p.tiles_w {
        for (var k = 0u; k < 16u; k++) {
            out[k * plane + i] = 0.0;
        }
        return;
    }
    let d = load_tile(at.row, at.tile, p.in_h, p.in_w, 4u, 2u, p.pad_h, p.pad_w);
    let v = input_transform(d);
    for (var r = 0u; r < 4u; r++) {
        let base = r * 4u * plane + i;
        out[base] = v[r].x;
        out[base + plane] = v[r].y;
        out[base + 2u * plane] = v[r].z;
        out[base + 3u * plane] = v[r].w;
    }
}

@compute @workgroup_size(256)
fn winograd_output(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    // One invocation per (o, tile): i = o·P + tile.
    let tiles = p.batch * p.tiles_h * p.tiles_w;
    let o = i / tiles;
    let tile = i % tiles;
    let plane = p.out_channels * p.cols;
    let at = o * p.cols + tile;
    // Aᵀ M: 2×4, from the 16 entries of M.
    var am: array<vec4<f32>, 2>;
    for (var s = 0u; s < 4u; s++) {
        let m0 = src[s * plane + at];
        let m1 = src[(4u + s) * plane + at];
        let m2 = src[(8u + s) * plane + at];
        let m3 = src[(12u + s) * plane + at];
        am[0][s] = m0 + m1 + m2;
        am[1][s] = m1 - m2 - m3;
    }
    var b = 0.0;
    if p.has_bias != 0u {
        b = bias[o];
    }
    let tx = tile % p.tiles_w;
    let ty = (tile / p.tiles_w) % p.tiles_h;
    let n = tile / (p.tiles_w * p.tiles_h);
    let base = (n * p.out_channels + o) * p.out_h * p.out_w;
    for (var r = 0u; r < 2u; r++) {
        let y = 2u * ty + r;
        if y >= p.out_h {
            continue;
        }
        let a = am[r];
        // (Aᵀ M) A: the same combination of columns.
        let row = vec2<f32>(a.x + a.y + a.z, a.y - a.z - a.w) + b;
        let x = 2u * tx;
        out[base + y * p.out_w + x] = row.x;
        if x + 1u < p.out_w {
            out[base + y * p.out_w + x + 1u] = row.y;
        }
    }
}

@compute @workgroup_size(256)
fn winograd_grad_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let at = tile_column(i);
    let plane = p.rows * p.cols;
    if at.tile >= p.batch * p.tiles_h * p.tiles_w {
        for (var k = 0u; k < 16u; k++) {
            out[k * plane + i] = 0.0;
        }
        return;
    }
    // The 2×2 output gradient tile (no padding), zeros beyond out_h × out_w.
    let e = load_tile(at.row, at.tile, p.out_h, p.out_w, 2u, 2u, 0u, 0u);
    // A e Aᵀ: A is 4×2 (Aᵀ's transpose), so rows first: A e is 4×2.
    let r0 = e[0].xy;
    let r1 = e[1].xy;
    let ae = array<vec2<f32>, 4>(r0, r0 + r1, r0 - r1, -r1);
    for (var r = 0u; r < 4u; r++) {
        let a = ae[r];
        let base = r * 4u * plane + i;
        out[base] = a.x;
        out[base + plane] = a.x + a.y;
        out[base + 2u * plane] = a.x - a.y;
        out[base + 3u * plane] = -a.y;
    }
}

@compute @workgroup_size(256)
fn winograd_filter_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    // src: dU [16, O, C]; i = o·C + c.
    let plane = p.out_channels * p.channels;
    // Gᵀ dU: 3×4, column by column.
    var gu: array<vec4<f32>, 3>;
    for (var s = 0u; s < 4u; s++) {
        let u0 = src[s * plane + i];
        let u1 = src[(4u + s) * plane + i];
        let u2 = src[(8u + s) * plane + i];
        let u3 = src[(12u + s) * plane + i];
        gu[0][s] = u0 + 0.5 * (u1 + u2);
        gu[1][s] = 0.5 * (u1 - u2);
        gu[2][s] = 0.5 * (u1 + u2) + u3;
    }
    // (Gᵀ dU) G: the same combination of columns.
    for (var r = 0u; r < 3u; r++) {
        let a = gu[r];
        let base = i * 9u + r * 3u;
        out[base] = a.x + 0.5 * (a.y + a.z);
        out[base + 1u] = 0.5 * (a.y - a.z);
        out[base + 2u] = 0.5 * (a.y + a.z) + a.w;
    }
}
