// A convolution's forward and weight gradient on tensor cores (f16 inputs, f32 accumulation: the
// opt-in `MatmulPrecision::F16TensorCores`), for one group, on lib/coop_tiles.wgsl's 128×256
// tiles. Implicit GEMMs, as conv2d.wgsl's: im2col's indexing happens in the loads. With
// k = (c, kh, kw), s = (oh, ow), q = (n, s), S = oh·ow and W the weight as a matrix [o, c·kh·kw]:
//
//   forward                  out[n, o, s] = Σ_k W[o, k] · cols[n, k, s] + bias[o]
//                            M = o, N = n·S, K = c·kh·kw
//   weight gradient          dW[o, k] = Σ_q grad[n, o, s] · cols[n, k, s]
//                            M = o, N = c·kh·kw, K = n·S
//
// K is cut into splits of `split_len` (a multiple of the K slice; all of K in one where the
// dispatcher does not split it): split z writes its partial sums to its own copy z of the
// output, and the dispatcher adds them up (a forward with a bias is not split).
//
// As in conv2d.wgsl, no division happens per load: each invocation's loads keep the same
// columns of the product in every slice of a tile, whose positions it works out once per tile
// (`begin_tile`), and the K side of each slice is decomposed once per workgroup into the table
// `kt` (`begin_slice`, one slice ahead). The window's parameters are in lib/window.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> grad: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The products; each module computes one, `PRODUCT`, which its constants set (`conv2d_coop.rs`),
// with `LHS_K_FAST` and `RHS_N_FAST` (see lib/coop_tiles.wgsl): the left operand along k, the
// right along its columns in the forward and along k (the reduction's pixels) in the weight
// gradient.
const FORWARD: u32 = 0u;
const WEIGHT: u32 = 1u;

// A row or tap offset that puts any window position out of the image: it marks a column, tap or
// reduction row past the product's end, whose loads read zero. Sums with valid offsets (below
// 2^30, `check_index_range`) stay inside i32.
const OUTSIDE: i32 = -1073741824;

// The K side of two slices (entry k % KT for k): the forward's taps k = (c, kh, kw) as (offset
// from a window's origin in x, row offset, column offset, 0); the weight gradient's reduction
// rows q = (n, s) as (offset of the window's origin in x, its row, its column, offset of
// grad[n, 0, s], -1 past the end). Written for slice k0 + BK while slice k0 is multiplied, so
// the half that the fetches read is never the one being written.
const KT: u32 = 2u * BK;
var<workgroup> kt: array<vec4<i32>, KT>;

// The forward's 4 columns (n, s) of this invocation in the current tile: where the window
// starts in x, its first row (OUTSIDE past the last column) and its first column.
var<private> col_at: vec4<i32>;
var<private> col_h: vec4<i32>;
var<private> col_w: vec4<i32>;
// The weight gradient's 8 columns k = (c, kh, kw) of this invocation in the current tile, as
// taps (see `kt`; row offset OUTSIDE past the last column).
var<private> k_tap: array<vec4<i32>, LOADS_B>;
// The current split of K: where its partial sums start.
var<private> split_base: u32;

fn taps() -> u32 {
    return p.kernel_h * p.kernel_w;
}

fn weight_cols() -> u32 {
    return p.channels * taps();
}

fn spatial() -> u32 {
    return p.out_h * p.out_w;
}

fn pixels() -> u32 {
    return p.batch * spatial();
}

// Tap k of any window (see `kt`).
fn tap(k: u32) -> vec4<i32> {
    if k >= weight_cols() {
        return vec4<i32>(0, OUTSIDE, 0, 0);
    }
    let t = k % taps();
    let dh = i32((t / p.kernel_w) * p.dilation_h);
    let dw = i32((t % p.kernel_w) * p.dilation_w);
    return vec4<i32>(i32((k / taps()) * p.in_h * p.in_w) + dh * i32(p.in_w) + dw, dh, dw, 0);
}

// The window of column or reduction row q = (n, s): (offset of its origin in x, origin row,
// origin column, offset of grad[n, 0, s]); past the last, row OUTSIDE and grad offset -1.
fn window_of(q: u32) -> vec4<i32> {
    if q >= pixels() {
        return vec4<i32>(0, OUTSIDE, 0, -1);
    }
    let n = q / spatial();
    let s = q % spatial();
    let h = i32((s / p.out_w) * p.stride_h) - i32(p.pad_h);
    let w = i32((s % p.out_w) * p.stride_w) - i32(p.pad_w);
    let origin = i32(n * p.channels * p.in_h * p.in_w) + h * i32(p.in_w) + w;
    return vec4<i32>(origin, h, w, i32(n * p.out_channels * spatial() + s));
}

// The input under tap t of the window at (origin, h, w); zero in the padding and past the ends.
fn x_at(origin: i32, h: i32, w: i32, t: vec4<i32>) -> f32 {
    if u32(h + t.y) < p.in_h && u32(w + t.z) < p.in_w {
        return x[u32(origin + t.x)];
    }
    return 0.0;
}

// Weight element (o, k), zero outside.
fn weight_at(o: u32, k: u32) -> f32 {
    if o < p.out_channels && k < weight_cols() {
        return weight[o * weight_cols() + k];
    }
    return 0.0;
}

fn lhs_fetch(t: u32, r: u32, k: u32) -> vec4<f32> {
    if PRODUCT == FORWARD {
        return vec4<f32>(weight_at(r, k), weight_at(r, k + 1u), weight_at(r, k + 2u), weight_at(r, k + 3u));
    }
    // The output gradient as [o, q], along the reduction rows q (k here, a multiple of 4: the
    // four share a table half).
    var v = vec4<f32>(0.0);
    if r < p.out_channels {
        let channel = r * spatial();
        for (var e = 0u; e < 4u; e++) {
            let at = kt[(k + e) % KT].w;
            if at >= 0 {
                v[e] = grad[u32(at) + channel];
            }
        }
    }
    return v;
}

fn rhs_fetch(t: u32, k: u32, c: u32) -> vec4<f32> {
    var v: vec4<f32>;
    if PRODUCT == FORWARD {
        // Row k of the columns, along this tile's columns.
        let tk = kt[k % KT];
        for (var e = 0u; e < 4u; e++) {
            v[e] = x_at(col_at[e], col_h[e], col_w[e], tk);
        }
        return v;
    }
    // The columns transposed, [q, k]: column `t` of this tile along the reduction rows q.
    for (var e = 0u; e < 4u; e++) {
        let q = kt[(k + e) % KT];
        v[e] = x_at(q.x, q.y, q.z, k_tap[t]);
    }
    return v;
}

// The table entries of the slice at k0, by the first BK invocations.
fn begin_slice(k0: u32, lid: u32) {
    if lid < BK {
        let k = k0 + lid;
        if PRODUCT == FORWARD {
            kt[k % KT] = tap(k);
        } else {
            kt[k % KT] = window_of(k);
        }
    }
}

// This invocation's columns of the tile at col0 (see `col_at` and `k_tap`).
fn begin_tile(col0: u32, lid: u32) {
    if PRODUCT == WEIGHT {
        for (var t = 0u; t < LOADS_B; t++) {
            k_tap[t] = tap(col0 + rhs_coord(lid, t, false).y);
        }
        return;
    }
    let first = col0 + rhs_coord(lid, 0u, true).y;
    for (var e = 0u; e < 4u; e++) {
        let win = window_of(first + e);
        col_at[e] = win.x;
        col_h[e] = win.y;
        col_w[e] = win.z;
    }
}

// The forward starts each output channel's sums from its bias, where one is bound.
fn seeds_rows() -> bool {
    return PRODUCT == FORWARD && p.has_bias != 0u;
}

fn row_seed(r: u32) -> f32 {
    if r < p.out_channels {
        return bias[r];
    }
    return 0.0;
}

// The product's columns: n·S pixels, or the weight gradient's k; and its K.
fn product_cols() -> u32 {
    return select(pixels(), weight_cols(), PRODUCT == WEIGHT);
}

fn product_k() -> u32 {
    return select(weight_cols(), pixels(), PRODUCT == WEIGHT);
}

fn out_block(r: u32, c: u32) -> u32 {
    if PRODUCT == WEIGHT {
        return split_base + r * weight_cols() + c;
    }
    // [n, o, S]: column c is (n, s).
    return split_base + (c / spatial()) * p.out_channels * spatial() + r * spatial() + c % spatial();
}

fn out_stride() -> u32 {
    return select(spatial(), weight_cols(), PRODUCT == WEIGHT);
}

fn out_put(r: u32, c: u32, v: f32) {
    if r < p.out_channels && c < product_cols() {
        out[out_block(r, c)] = v;
    }
}

// M (output channels) × N (columns) tiles over x and y, walked with grid strides, for each split
// of K over z: pieces of `split_len` (a multiple of the K slice), whose partial sums go to their
// own copy of the output for the dispatcher to add up.
fn product(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) {
    let rows = p.out_channels;
    let cols = product_cols();
    let tiles_m = (rows + LTILE_M - 1u) / LTILE_M;
    let tiles_n = (cols + LTILE_N - 1u) / LTILE_N;
    let splits = (product_k() + p.split_len - 1u) / p.split_len;
    // Workgroup-uniform. A 16×16 block of the forward stays in one sample's plane when S is a
    // multiple of 16 (blocks start at multiples of 16).
    let whole_blocks = PRODUCT == WEIGHT || spatial() % 16u == 0u;
    for (var z = wid.z; z < splits; z += nwg.z) {
        split_base = z * rows * cols;
        let k_begin = z * p.split_len;
        let k_end = min(k_begin + p.split_len, product_k());
        for (var tm = wid.y; tm < tiles_m; tm += nwg.y) {
            for (var tn = wid.x; tn < tiles_n; tn += nwg.x) {
                let row0 = tm * LTILE_M;
                let col0 = tn * LTILE_N;
                begin_tile(col0, lid);
                multiply_tile(row0, col0, k_begin, k_end, lid);
                let interior = row0 + LTILE_M <= rows && col0 + LTILE_N <= cols && whole_blocks;
                store_tile(row0, col0, lid, interior);
            }
        }
    }
}

@compute @workgroup_size(256)
fn conv2d_coop(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    product(wid, nwg, lid);
}
