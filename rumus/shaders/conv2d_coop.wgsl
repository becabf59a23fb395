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
// Each invocation's loads keep the same columns of the product in every slice of a tile (see
// lhs_coord and rhs_coord in the library): their window positions are worked out once per tile
// (`begin_tile`); the weight gradient's rows of the reduction, shared by both its operands, once
// per slice (`begin_slice`). The window's parameters are in lib/window.wgsl.

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

// The forward's 4 columns (n, s) of this invocation in the current tile: where their sample
// starts in the input, -1 past the last column; the window's first input row and column.
var<private> col_base: vec4<i32>;
var<private> col_h: vec4<i32>;
var<private> col_w: vec4<i32>;
// The weight gradient's 8 columns k = (c, kh, kw) of this invocation in the current tile: the
// channel's offset in a sample of the input (-1 past the last column) and the tap's offsets.
var<private> k_chan: array<i32, LOADS_B>;
var<private> k_h: array<i32, LOADS_B>;
var<private> k_w: array<i32, LOADS_B>;
// The weight gradient's 4 reduction rows q = (n, s) of this invocation in the current slice:
// where their sample starts in the input (-1 past the last row), the window's first input row
// and column, and where they are in the output gradient's channel 0.
var<private> q_x: vec4<i32>;
var<private> q_h: vec4<i32>;
var<private> q_w: vec4<i32>;
var<private> q_grad: vec4<u32>;
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

// Where the window of pixel q = (n, s) lies: its sample's offset in the input (-1 past the last
// pixel) and its first input row and column.
struct Window {
    base: i32,
    h: i32,
    w: i32,
}

fn window_of(q: u32) -> Window {
    if q >= pixels() {
        return Window(-1, 0, 0);
    }
    let s = q % spatial();
    let base = i32((q / spatial()) * p.channels * p.in_h * p.in_w);
    let h = i32((s / p.out_w) * p.stride_h) - i32(p.pad_h);
    return Window(base, h, i32((s % p.out_w) * p.stride_w) - i32(p.pad_w));
}

// Where column k = (c, kh, kw) of the weight reads: its channel's offset in a sample (-1 past the
// last column) and the tap's row and column offsets.
struct Tap {
    chan: i32,
    dh: i32,
    dw: i32,
}

fn tap_of(k: u32) -> Tap {
    if k >= weight_cols() {
        return Tap(-1, 0, 0);
    }
    let tap = k % taps();
    let chan = i32((k / taps()) * p.in_h * p.in_w);
    return Tap(chan, i32((tap / p.kernel_w) * p.dilation_h), i32((tap % p.kernel_w) * p.dilation_w));
}

// Input element at the window (base, h, w) shifted by a tap (dh, dw) in channel offset `chan`,
// zero in the padding or where `base` or `chan` is -1.
fn x_at(base: i32, h: i32, w: i32, chan: i32, dh: i32, dw: i32) -> f32 {
    let ih = h + dh;
    let iw = w + dw;
    if base < 0 || chan < 0 || ih < 0 || iw < 0 || ih >= i32(p.in_h) || iw >= i32(p.in_w) {
        return 0.0;
    }
    return x[u32(base + chan + ih * i32(p.in_w) + iw)];
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
        // Along k.
        return vec4<f32>(weight_at(r, k), weight_at(r, k + 1u), weight_at(r, k + 2u), weight_at(r, k + 3u));
    }
    // The output gradient as [o, q], along this slice's rows q.
    if r >= p.out_channels {
        return vec4<f32>(0.0);
    }
    var v = vec4<f32>(0.0);
    let channel = r * spatial();
    for (var e = 0u; e < 4u; e++) {
        if q_x[e] >= 0 {
            v[e] = grad[q_grad[e] + channel];
        }
    }
    return v;
}

fn rhs_fetch(t: u32, k: u32, c: u32) -> vec4<f32> {
    if PRODUCT == FORWARD {
        // Row k of the columns, along this tile's columns.
        let tap = tap_of(k);
        var v: vec4<f32>;
        for (var e = 0u; e < 4u; e++) {
            v[e] = x_at(col_base[e], col_h[e], col_w[e], tap.chan, tap.dh, tap.dw);
        }
        return v;
    }
    // The columns transposed, [q, k]: column `t` of this tile along this slice's rows q.
    var v: vec4<f32>;
    for (var e = 0u; e < 4u; e++) {
        v[e] = x_at(q_x[e], q_h[e], q_w[e], k_chan[t], k_h[t], k_w[t]);
    }
    return v;
}

// The weight gradient's reduction rows of this slice (those of its right operand's loads, and
// its left's: both start at (lid % 8)·4 in the slice).
fn begin_slice(k0: u32, lid: u32) {
    if PRODUCT != WEIGHT {
        return;
    }
    let first = k0 + (lid % (BK / 4u)) * 4u;
    for (var e = 0u; e < 4u; e++) {
        let q = first + e;
        let at = window_of(q);
        q_x[e] = at.base;
        q_h[e] = at.h;
        q_w[e] = at.w;
        q_grad[e] = (q / spatial()) * p.out_channels * spatial() + q % spatial();
    }
}

// This invocation's columns of the tile at col0 (see `col_base` and `k_chan`).
fn begin_tile(col0: u32, lid: u32) {
    if PRODUCT == WEIGHT {
        for (var t = 0u; t < LOADS_B; t++) {
            let tap = tap_of(col0 + rhs_coord(lid, t, false).y);
            k_chan[t] = tap.chan;
            k_h[t] = tap.dh;
            k_w[t] = tap.dw;
        }
        return;
    }
    let first = col0 + rhs_coord(lid, 0u, true).y;
    for (var e = 0u; e < 4u; e++) {
        let at = window_of(first + e);
        col_base[e] = at.base;
        col_h[e] = at.h;
        col_w[e] = at.w;
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

// The product's columns: n·S pixels, or the weight gradient's k; and its K.
fn product_cols() -> u32 {
    return select(pixels(), weight_cols(), PRODUCT == WEIGHT);
}

fn product_k() -> u32 {
    return select(weight_cols(), pixels(), PRODUCT == WEIGHT);
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
