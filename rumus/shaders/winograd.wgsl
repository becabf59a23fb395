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
//   winograd_input_wgrad  Vt[ξ, p, c] = V[ξ, c, p], tile-major for the weight gradient
//   winograd_grad_tiles   Zt[ξ, p, o] = (A dy Aᵀ)ξ of tile p of the output gradient (zeros
//                         beyond out_h × out_w), tile-major
//   (matmul, sum)         dU[ξ]       = Σ_p Zt[ξ, p, ·]ᵀ Vt[ξ, p, ·]
//   winograd_filter_grad  dw[o, c]    = Gᵀ dU[·, o, c] G
//
// The layout of the tile matrices and what the two Winograd shaders share: lib/winograd_tiles.wgsl.

const TILE: u32 = 2u;

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

// Row r of the 4×4 input tile at `o`. Straight-line code: every index of the tile is a
// constant, so the tile stays in registers.
fn input_row(o: TileOrigin, r: i32, h: u32, w: u32) -> vec4<f32> {
    let y = o.y + r;
    return vec4<f32>(tap(o.plane, y, o.x, h, w), tap(o.plane, y, o.x + 1, h, w), tap(o.plane, y, o.x + 2, h, w),
                     tap(o.plane, y, o.x + 3, h, w));
}

fn load_input_tile(o: TileOrigin, h: u32, w: u32) -> array<vec4<f32>, 4> {
    return array<vec4<f32>, 4>(input_row(o, 0, h, w), input_row(o, 1, h, w), input_row(o, 2, h, w),
                               input_row(o, 3, h, w));
}

// A tile's 16 transformed values, as rows.
alias Transformed = array<vec4<f32>, 4>;

// Bᵀ d B of the input tile at `o`.
fn transformed_input_tile(o: TileOrigin, h: u32, w: u32) -> Transformed {
    return input_transform(load_input_tile(o, h, w));
}

// A e Aᵀ of the 2×2 output-gradient tile e at `o` (zeros beyond h × w). A is 4×2 (Aᵀ's
// transpose), so rows first: A e is 4×2.
fn transformed_grad_tile(o: TileOrigin, h: u32, w: u32) -> Transformed {
    let r0 = vec2<f32>(tap(o.plane, o.y, o.x, h, w), tap(o.plane, o.y, o.x + 1, h, w));
    let r1 = vec2<f32>(tap(o.plane, o.y + 1, o.x, h, w), tap(o.plane, o.y + 1, o.x + 1, h, w));
    let ae = array<vec2<f32>, 4>(r0, r0 + r1, r0 - r1, -r1);
    var z: Transformed;
    for (var r = 0u; r < 4u; r++) {
        let a = ae[r];
        z[r] = vec4<f32>(a.x, a.x + a.y, a.x - a.y, -a.y);
    }
    return z;
}

// The 16 transformed values of a tile, as rows, to `out` at `at` plus ξ planes of `plane`.
fn store_transformed(v: Transformed, at: u32, plane: u32) {
    for (var r = 0u; r < 4u; r++) {
        let base = r * 4u * plane + at;
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
    let t = output_tile(i);
    let plane = p.out_channels * p.cols;
    // Aᵀ M: 2×4, from the 16 entries of M.
    var am: array<vec4<f32>, 2>;
    for (var s = 0u; s < 4u; s++) {
        let m0 = src[s * plane + t.at];
        let m1 = src[(4u + s) * plane + t.at];
        let m2 = src[(8u + s) * plane + t.at];
        let m3 = src[(12u + s) * plane + t.at];
        am[0][s] = m0 + m1 + m2;
        am[1][s] = m1 - m2 - m3;
    }
    for (var r = 0u; r < 2u; r++) {
        let y = t.y0 + r;
        if y >= p.out_h {
            continue;
        }
        let a = am[r];
        // (Aᵀ M) A: the same combination of columns.
        let row = vec2<f32>(a.x + a.y + a.z, a.y - a.z - a.w) + t.bias;
        let x = t.x0;
        out[t.base + y * p.out_w + x] = row.x;
        if x + 1u < p.out_w {
            out[t.base + y * p.out_w + x + 1u] = row.y;
        }
    }
}

@compute @workgroup_size(256)
fn winograd_filter_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    // src: dU [16, rows, cols] (O and C rounded up); i = o·C + c.
    let plane = p.rows * p.cols;
    let o = i / p.channels;
    let at = o * p.cols + i % p.channels;
    // Gᵀ dU: 3×4, column by column.
    var gu: array<vec4<f32>, 3>;
    for (var s = 0u; s < 4u; s++) {
        let u0 = src[s * plane + at];
        let u1 = src[(4u + s) * plane + at];
        let u2 = src[(8u + s) * plane + at];
        let u3 = src[(12u + s) * plane + at];
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
