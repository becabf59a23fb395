// Fused 2-D convolution over NCHW input as three implicit GEMMs: im2col's indexing happens inside
// the tile loads, so no column matrix is ever written. With k = (c, kh, kw), s = (oh, ow) and
// one group's weights seen as a matrix W [o/g, c/g·kh·kw], per group:
//
//   conv2d_forward      out[n, o, s] = Σ_k W[o, k] · cols[n, k, s] + bias[o]
//                       M = o/g, N = n·oh·ow (small images still fill tiles), K = c/g·kh·kw
//   conv2d_weight_grad  dW[o, k] = Σ_(n, s) grad[n, o, s] · cols[n, k, s]
//                       M = o/g, N = c/g·kh·kw, K = n·oh·ow cut into splits; each split writes
//                       its partial sums to out[split, o, k] and the dispatcher adds them up
//   conv2d_input_grad   dX[n, c, h, w] = Σ_(o, kh, kw) W[o, c, kh, kw] · grad[n, o, oh, ow]
//                       over the (oh, ow) with oh·stride_h = h + pad_h - kh·dilation_h exactly
//                       (w likewise), per stride phase (the pixels that take the same taps):
//                       M = c/g, N = n·(the phase's h·w), K = o/g·(its taps); up to 2×2
//                       phases per dispatch, one per workgroup z. A gather: no atomics.
//
// The tiling is matmul.wgsl's scheme: a 16×16 workgroup computes a 64×64 tile of the weight
// gradient, 4×4 outputs per invocation, and a 64×128 tile of the forward and input gradient,
// whose N (pixels) is long: 4×8 outputs per invocation, two 4×4 blocks 64 columns apart, so each
// value read from workgroup memory feeds twice the products. K goes in slices of 16 through
// workgroup memory (k-major rows of 64 or 128 values padded by one vec4), and the next slice is
// loaded into registers while the current one is multiplied.
// Two rules keep divisions out of the K loop:
// - an invocation loads the same tile columns (N side) in every slice, so it decomposes them
//   once per tile;
// - a slice's K side is decomposed once per workgroup, by 16 invocations, into the table `kt`
//   that the loads read. The table is double buffered: the next slice's half is written before
//   the barrier that precedes its first read, while nobody reads that half.
// The gathered operand (input, or output gradient) is loaded along the tile's columns, so
// consecutive invocations read consecutive addresses along the spatial axis. Operands contiguous
// along K (weights; both operands of the weight gradient) are loaded 8 consecutive k per row:
// 32-byte runs in global memory, and their transposing stores into the shared tiles hit 32
// different banks. Workgroups walk the tiles with a grid stride over a 1-D dispatch, so any
// tile count works. The window's parameters are in lib/window.wgsl. The `_large` entry points at
// the end compute the forward and input gradient on 128×128 tiles, 8×8 outputs per invocation
// (see there).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> grad: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const TILE: u32 = 64u;
// N side of the forward's and input gradient's tiles.
const WIDE: u32 = 128u;
const BK: u32 = 16u;
// vec4 per k row of a shared tile: 64 (or 128) values and one vec4 of padding.
const ROW: u32 = 17u;
const ROW_WIDE: u32 = 33u;

// The current slice of A ([BK][TILE] rows) and of B ([BK][TILE] columns, or [BK][WIDE] in
// `tb_wide`), k-major. Each kernel declares only the arrays it uses, so the weight gradient does
// not reserve the wide one.
var<workgroup> ta: array<vec4<f32>, 272>;
var<workgroup> tb: array<vec4<f32>, 272>;
var<workgroup> tb_wide: array<vec4<f32>, 528>;
// K-side table of the current and the next slice (two halves of BK); conv2d_input_grad also
// keeps each k's weight offset in `kt_weight`.
var<workgroup> kt: array<vec4<i32>, 32>;
var<workgroup> kt_weight: array<u32, 32>;

// The 4×4 outputs of this invocation: rows ty·4 + i, columns tx·4 .. tx·4 + 3; in a wide tile
// also columns 64 + tx·4 .. 64 + tx·4 + 3 (acc4..acc7).
var<private> acc0: vec4<f32>;
var<private> acc1: vec4<f32>;
var<private> acc2: vec4<f32>;
var<private> acc3: vec4<f32>;
var<private> acc4: vec4<f32>;
var<private> acc5: vec4<f32>;
var<private> acc6: vec4<f32>;
var<private> acc7: vec4<f32>;

struct Sizes {
    // Input and output channels per group.
    cg: u32,
    og: u32,
    // kh·kw, h·w and oh·ow.
    taps: u32,
    plane: u32,
    spatial: u32,
    // The input gradient's stride phase (see `pixel`), rows (x) and columns (y): its first
    // input row and column, rows and columns, first taps and tap counts; its taps and its pixels
    // per sample.
    first: vec2<u32>,
    sub: vec2<u32>,
    tap: vec2<u32>,
    tap_counts: vec2<u32>,
    phase_taps: u32,
    sub_plane: u32,
}

// The sizes of a dispatch, with the stride phase of its workgroups' z (`phase`; zero and unused
// outside the input gradient).
fn sizes(phase: u32) -> Sizes {
    let a = p.phase_axes[phase / max(p.phases_w, 1u)];
    let b = p.phase_axes[2u + phase % max(p.phases_w, 1u)];
    return Sizes(p.channels / p.groups, p.out_channels / p.groups, p.kernel_h * p.kernel_w, p.in_h * p.in_w,
                 p.out_h * p.out_w, vec2<u32>(a.x, b.x), vec2<u32>(a.y, b.y), vec2<u32>(a.z, b.z),
                 vec2<u32>(a.w, b.w), a.w * b.w, a.y * b.y);
}

fn div_up(a: u32, b: u32) -> u32 {
    return (a + b - 1u) / b;
}

// ----- tile mechanics shared by the three kernels -----

// Load t (0..3) of a K-contiguous operand by invocation `lid`: tile row kc_row, slice row kc_k.
fn kc_row(lid: u32, t: u32) -> u32 {
    return lid / 8u + 32u * (t / 2u);
}

fn kc_k(lid: u32, t: u32) -> u32 {
    return lid % 8u + 8u * (t % 2u);
}

fn put_a(k: u32, r: u32, v: f32) {
    ta[k * ROW + r / 4u][r % 4u] = v;
}

fn put_b(k: u32, c: u32, v: f32) {
    tb[k * ROW + c / 4u][c % 4u] = v;
}

// Stores loads 0..3 of a K-contiguous operand into A (or B).
fn stash_a(v: vec4<f32>, lid: u32) {
    put_a(kc_k(lid, 0u), kc_row(lid, 0u), v.x);
    put_a(kc_k(lid, 1u), kc_row(lid, 1u), v.y);
    put_a(kc_k(lid, 2u), kc_row(lid, 2u), v.z);
    put_a(kc_k(lid, 3u), kc_row(lid, 3u), v.w);
}

fn stash_b(v: vec4<f32>, lid: u32) {
    put_b(kc_k(lid, 0u), kc_row(lid, 0u), v.x);
    put_b(kc_k(lid, 1u), kc_row(lid, 1u), v.y);
    put_b(kc_k(lid, 2u), kc_row(lid, 2u), v.z);
    put_b(kc_k(lid, 3u), kc_row(lid, 3u), v.w);
}

// The 8 values an invocation gathers per slice for a wide B: tile column lid % 128, slice rows
// lid / 128 + 2t (t = 0..7; `lo` holds t = 0..3).
struct Gathered {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn put_b_wide(k: u32, c: u32, v: f32) {
    tb_wide[k * ROW_WIDE + c / 4u][c % 4u] = v;
}

fn stash_b_gathered(v: Gathered, lid: u32) {
    let c = lid % WIDE;
    let k = lid / WIDE;
    put_b_wide(k, c, v.lo.x);
    put_b_wide(k + 2u, c, v.lo.y);
    put_b_wide(k + 4u, c, v.lo.z);
    put_b_wide(k + 6u, c, v.lo.w);
    put_b_wide(k + 8u, c, v.hi.x);
    put_b_wide(k + 10u, c, v.hi.y);
    put_b_wide(k + 12u, c, v.hi.z);
    put_b_wide(k + 14u, c, v.hi.w);
}

fn mac(k: u32, tx: u32, ty: u32) {
    let a = ta[k * ROW + ty];
    let b = tb[k * ROW + tx];
    acc0 = fma(vec4<f32>(a.x), b, acc0);
    acc1 = fma(vec4<f32>(a.y), b, acc1);
    acc2 = fma(vec4<f32>(a.z), b, acc2);
    acc3 = fma(vec4<f32>(a.w), b, acc3);
}

fn mac_wide(k: u32, tx: u32, ty: u32) {
    let a = ta[k * ROW + ty];
    let b = tb_wide[k * ROW_WIDE + tx];
    let b_far = tb_wide[k * ROW_WIDE + 16u + tx];
    acc0 = fma(vec4<f32>(a.x), b, acc0);
    acc1 = fma(vec4<f32>(a.y), b, acc1);
    acc2 = fma(vec4<f32>(a.z), b, acc2);
    acc3 = fma(vec4<f32>(a.w), b, acc3);
    acc4 = fma(vec4<f32>(a.x), b_far, acc4);
    acc5 = fma(vec4<f32>(a.y), b_far, acc5);
    acc6 = fma(vec4<f32>(a.z), b_far, acc6);
    acc7 = fma(vec4<f32>(a.w), b_far, acc7);
}

// One slice, written out, so every workgroup-memory offset is a constant plus tx or ty.
fn multiply(tx: u32, ty: u32) {
    mac(0u, tx, ty);
    mac(1u, tx, ty);
    mac(2u, tx, ty);
    mac(3u, tx, ty);
    mac(4u, tx, ty);
    mac(5u, tx, ty);
    mac(6u, tx, ty);
    mac(7u, tx, ty);
    mac(8u, tx, ty);
    mac(9u, tx, ty);
    mac(10u, tx, ty);
    mac(11u, tx, ty);
    mac(12u, tx, ty);
    mac(13u, tx, ty);
    mac(14u, tx, ty);
    mac(15u, tx, ty);
}

fn multiply_wide(tx: u32, ty: u32) {
    mac_wide(0u, tx, ty);
    mac_wide(1u, tx, ty);
    mac_wide(2u, tx, ty);
    mac_wide(3u, tx, ty);
    mac_wide(4u, tx, ty);
    mac_wide(5u, tx, ty);
    mac_wide(6u, tx, ty);
    mac_wide(7u, tx, ty);
    mac_wide(8u, tx, ty);
    mac_wide(9u, tx, ty);
    mac_wide(10u, tx, ty);
    mac_wide(11u, tx, ty);
    mac_wide(12u, tx, ty);
    mac_wide(13u, tx, ty);
    mac_wide(14u, tx, ty);
    mac_wide(15u, tx, ty);
}

// Whether this invocation's 4×4 block holds any output of an m×n matrix. Blocks wholly outside
// skip the products; with few rows (a first layer's channels, depthwise) whole warps do, which
// leaves their SM to other workgroups.
fn block_inside(row0: u32, col0: u32, tx: u32, ty: u32, m: u32, n: u32) -> bool {
    return row0 + ty * 4u < m && col0 + tx * 4u < n;
}

fn clear() {
    acc0 = vec4<f32>(0.0);
    acc1 = vec4<f32>(0.0);
    acc2 = vec4<f32>(0.0);
    acc3 = vec4<f32>(0.0);
    acc4 = vec4<f32>(0.0);
    acc5 = vec4<f32>(0.0);
    acc6 = vec4<f32>(0.0);
    acc7 = vec4<f32>(0.0);
}

// Writes v[e] to out[row + cols[e]] for the first n of the 4 columns.
fn store4(row: u32, cols: vec4<u32>, n: u32, v: vec4<f32>) {
    for (var e = 0u; e < n; e++) {
        out[row + cols[e]] = v[e];
    }
}

// Of the 4 columns from c, how many lie inside a matrix of `cols` columns.
fn inside(c: u32, cols: u32) -> u32 {
    return min(cols - min(c, cols), 4u);
}

// ----- windows over the input (forward and weight gradient) -----

// The window of output pixel s of sample nb over channels c0..: (offset of its origin in x,
// origin row, origin column, 0). The origin lies in the padding where negative.
fn window(nb: u32, c0: u32, s: u32, z: Sizes) -> vec4<i32> {
    let y = i32(s / p.out_w * p.stride_h) - i32(p.pad_h);
    let col = i32(s % p.out_w * p.stride_w) - i32(p.pad_w);
    return vec4<i32>(i32((nb * p.channels + c0) * z.plane) + y * i32(p.in_w) + col, y, col, 0);
}

// Tap k = (c, kh, kw) of any window: (offset from the window's origin, row offset, column
// offset, 0).
fn tap(k: u32, z: Sizes) -> vec4<i32> {
    let t = k % z.taps;
    let dy = i32(t / p.kernel_w * p.dilation_h);
    let dx = i32(t % p.kernel_w * p.dilation_w);
    return vec4<i32>(i32(k / z.taps * z.plane) + dy * i32(p.in_w) + dx, dy, dx, 0);
}

// The input value under tap `t` of window `win` (if `ok`); zero in the padding.
fn x_at(win: vec4<i32>, t: vec4<i32>, ok: bool) -> f32 {
    if ok && u32(win.y + t.y) < p.in_h && u32(win.z + t.z) < p.in_w {
        return x[u32(win.x + t.x)];
    }
    return 0.0;
}

// ----- forward -----

fn weight_at(i: u32, ok: bool) -> f32 {
    if ok {
        return weight[i];
    }
    return 0.0;
}

// Weights [o, k] from row `base` (of `rows` valid ones), slice k0.
fn forward_a(base: u32, rows: u32, k_len: u32, k0: u32, lid: u32) -> vec4<f32> {
    let r0 = kc_row(lid, 0u);
    let r2 = kc_row(lid, 2u);
    let k = k0 + kc_k(lid, 0u);
    return vec4<f32>(
        weight_at(base + r0 * k_len + k, r0 < rows && k < k_len),
        weight_at(base + r0 * k_len + k + 8u, r0 < rows && k + 8u < k_len),
        weight_at(base + r2 * k_len + k, r2 < rows && k < k_len),
        weight_at(base + r2 * k_len + k + 8u, r2 < rows && k + 8u < k_len),
    );
}

// This invocation's column (window `win`) at slice rows gk, gk + 2, gk + 4, gk + 6 of the table
// half `half`...
fn forward_b4(win: vec4<i32>, ok: bool, k_len: u32, k0: u32, half: u32, gk: u32) -> vec4<f32> {
    return vec4<f32>(
        x_at(win, kt[half + gk], ok && k0 + gk < k_len),
        x_at(win, kt[half + gk + 2u], ok && k0 + gk + 2u < k_len),
        x_at(win, kt[half + gk + 4u], ok && k0 + gk + 4u < k_len),
        x_at(win, kt[half + gk + 6u], ok && k0 + gk + 6u < k_len),
    );
}

// ...slice rows gk + 2t for t = 0..7.
fn forward_b(win: vec4<i32>, ok: bool, k_len: u32, k0: u32, half: u32, gk: u32) -> Gathered {
    return Gathered(forward_b4(win, ok, k_len, k0, half, gk), forward_b4(win, ok, k_len, k0, half, gk + 8u));
}

// Offset in out of column c (sample, output pixel) at channel 0.
fn forward_column(c: u32, z: Sizes) -> u32 {
    return c / z.spatial * p.out_channels * z.spatial + c % z.spatial;
}

fn forward_store(o: u32, ok: bool, cols: vec4<u32>, n: u32, v: vec4<f32>, z: Sizes) {
    if !ok {
        return;
    }
    var b = 0.0;
    if p.has_bias != 0u {
        b = bias[o];
    }
    store4(o * z.spatial, cols, n, v + b);
}

// A 4×4 block of outputs (rows v0..v3) at rows r.., columns c.. (`n` inside).
fn forward_store_block(r: u32, g: u32, c: u32, n: u32, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
                       z: Sizes) {
    let oc = vec4<u32>(forward_column(c, z), forward_column(c + 1u, z), forward_column(c + 2u, z),
                       forward_column(c + 3u, z));
    let o = g * z.og + r;
    forward_store(o, r < z.og, oc, n, v0, z);
    forward_store(o + 1u, r + 1u < z.og, oc, n, v1, z);
    forward_store(o + 2u, r + 2u < z.og, oc, n, v2, z);
    forward_store(o + 3u, r + 3u < z.og, oc, n, v3, z);
}

@compute @workgroup_size(16, 16)
fn conv2d_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let z = sizes(0u);
    let k_len = z.cg * z.taps;
    let cols = p.batch * z.spatial;
    let tiles_m = div_up(z.og, TILE);
    let tiles_n = div_up(cols, WIDE);
    let tx = lid % 16u;
    let ty = lid / 16u;
    let gk = lid / WIDE;
    // M tiles vary fastest: workgroups that gather the same inputs run side by side.
    for (var t = wid.x; t < tiles_m * tiles_n * p.groups; t += nwg.x) {
        let row0 = t % tiles_m * TILE;
        let col0 = t / tiles_m % tiles_n * WIDE;
        let g = t / (tiles_m * tiles_n);
        let col = col0 + lid % WIDE;
        let win = window(col / z.spatial, g * z.cg, col % z.spatial, z);
        let w_base = (g * z.og + row0) * k_len;
        let rows = z.og - row0;
        let busy = block_inside(row0, col0, tx, ty, z.og, cols);
        clear();
        if lid < BK {
            kt[lid] = tap(lid, z);
        }
        workgroupBarrier();
        var ra = forward_a(w_base, rows, k_len, 0u, lid);
        var rb = forward_b(win, col < cols, k_len, 0u, 0u, gk);
        var half = BK;
        for (var k0 = 0u; k0 < k_len; k0 += BK) {
            stash_a(ra, lid);
            stash_b_gathered(rb, lid);
            let next = k0 + BK;
            if lid < BK && next < k_len {
                kt[half + lid] = tap(next + lid, z);
            }
            workgroupBarrier();
            if next < k_len {
                ra = forward_a(w_base, rows, k_len, next, lid);
                rb = forward_b(win, col < cols, k_len, next, half, gk);
            }
            if busy {
                multiply_wide(tx, ty);
            }
            workgroupBarrier();
            half = BK - half;
        }
        let c = col0 + tx * 4u;
        let r = row0 + ty * 4u;
        forward_store_block(r, g, c, inside(c, cols), acc0, acc1, acc2, acc3, z);
        forward_store_block(r, g, c + TILE, inside(c + TILE, cols), acc4, acc5, acc6, acc7, z);
    }
}

// ----- weight gradient -----

// Entry j = (n, oh, ow) of the reduction: the window of (oh, ow) in sample n from channel 0
// (as `window`), with the offset of grad[n, 0, oh, ow] as the fourth value.
fn reduction_entry(j: u32, z: Sizes) -> vec4<i32> {
    let nb = j / z.spatial;
    let s = j % z.spatial;
    return vec4<i32>(window(nb, 0u, s, z).xyz, i32(nb * p.out_channels * z.spatial + s));
}

fn grad_at(i: u32, ok: bool) -> f32 {
    if ok {
        return grad[i];
    }
    return 0.0;
}

// What one invocation loads in every slice: the output gradient of two output channels (rows
// kc_row(lid, 0) and kc_row(lid, 2) of the tile; `a*`: offset of grad[0, o, 0]) and the input
// under the taps of two weight columns (the same two of the tile's columns), each at reduction
// rows kc_k(lid, 0) and kc_k(lid, 1) of the slice.
struct WeightGradLanes {
    a0: u32,
    a2: u32,
    a0_ok: bool,
    a2_ok: bool,
    tap0: vec4<i32>,
    tap2: vec4<i32>,
    tap0_ok: bool,
    tap2_ok: bool,
}

struct Loads {
    a: vec4<f32>,
    b: vec4<f32>,
}

// The lanes of invocation `lid` for the 64×64 block of group g's weight gradient at (row0, col0).
fn weight_grad_lanes(row0: u32, col0: u32, g: u32, k_len: u32, lid: u32, z: Sizes) -> WeightGradLanes {
    let r0 = row0 + kc_row(lid, 0u);
    let r2 = row0 + kc_row(lid, 2u);
    let c0 = col0 + kc_row(lid, 0u);
    let c2 = col0 + kc_row(lid, 2u);
    let group_channels = vec4<i32>(i32(g * z.cg * z.plane), 0, 0, 0);
    return WeightGradLanes(
        (g * z.og + r0) * z.spatial,
        (g * z.og + r2) * z.spatial,
        r0 < z.og,
        r2 < z.og,
        tap(c0, z) + group_channels,
        tap(c2, z) + group_channels,
        c0 < k_len,
        c2 < k_len,
    );
}

fn weight_grad_loads(l: WeightGradLanes, j0: u32, j_end: u32, half: u32, lid: u32) -> Loads {
    let j = kc_k(lid, 0u);
    let lo = kt[half + j];
    let hi = kt[half + j + 8u];
    let lo_ok = j0 + j < j_end;
    let hi_ok = j0 + j + 8u < j_end;
    let a = vec4<f32>(
        grad_at(l.a0 + u32(lo.w), lo_ok && l.a0_ok),
        grad_at(l.a0 + u32(hi.w), hi_ok && l.a0_ok),
        grad_at(l.a2 + u32(lo.w), lo_ok && l.a2_ok),
        grad_at(l.a2 + u32(hi.w), hi_ok && l.a2_ok),
    );
    let b = vec4<f32>(
        x_at(lo, l.tap0, lo_ok && l.tap0_ok),
        x_at(hi, l.tap0, hi_ok && l.tap0_ok),
        x_at(lo, l.tap2, lo_ok && l.tap2_ok),
        x_at(hi, l.tap2, hi_ok && l.tap2_ok),
    );
    return Loads(a, b);
}

// A 4×4 block of split `split`'s partial sums (rows v0..v3) at rows r.., columns c.. of group
// g's weight gradient: out[split, o, k].
fn partial_store_block(split: u32, g: u32, r: u32, c: u32, k_len: u32, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>,
                       v3: vec4<f32>, z: Sizes) {
    let n = inside(c, k_len);
    let oc = vec4<u32>(c, c + 1u, c + 2u, c + 3u);
    let o = split * p.out_channels + g * z.og + r;
    if r < z.og {
        store4(o * k_len, oc, n, v0);
    }
    if r + 1u < z.og {
        store4((o + 1u) * k_len, oc, n, v1);
    }
    if r + 2u < z.og {
        store4((o + 2u) * k_len, oc, n, v2);
    }
    if r + 3u < z.og {
        store4((o + 3u) * k_len, oc, n, v3);
    }
}

@compute @workgroup_size(16, 16)
fn conv2d_weight_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let z = sizes(0u);
    let k_len = z.cg * z.taps;
    let reduction = p.batch * z.spatial;
    let splits = div_up(reduction, p.split_len);
    let tiles_m = div_up(z.og, TILE);
    let tiles_n = div_up(k_len, TILE);
    let tiles = tiles_m * tiles_n;
    let tx = lid % 16u;
    let ty = lid / 16u;
    // Tiles, then groups, then splits: workgroups that read the same stretch of the reduction
    // run side by side.
    for (var t = wid.x; t < tiles * p.groups * splits; t += nwg.x) {
        let row0 = t % tiles_m * TILE;
        let col0 = t / tiles_m % tiles_n * TILE;
        let g = t / tiles % p.groups;
        let split = t / (tiles * p.groups);
        let j_begin = split * p.split_len;
        let j_end = min(reduction, j_begin + p.split_len);
        let busy = block_inside(row0, col0, tx, ty, z.og, k_len);
        let lanes = weight_grad_lanes(row0, col0, g, k_len, lid, z);
        clear();
        if lid < BK {
            kt[lid] = reduction_entry(j_begin + lid, z);
        }
        workgroupBarrier();
        var loads = weight_grad_loads(lanes, j_begin, j_end, 0u, lid);
        var half = BK;
        for (var j0 = j_begin; j0 < j_end; j0 += BK) {
            stash_a(loads.a, lid);
            stash_b(loads.b, lid);
            let next = j0 + BK;
            if lid < BK && next < j_end {
                kt[half + lid] = reduction_entry(next + lid, z);
            }
            workgroupBarrier();
            if next < j_end {
                loads = weight_grad_loads(lanes, next, j_end, half, lid);
            }
            if busy {
                multiply(tx, ty);
            }
            workgroupBarrier();
            half = BK - half;
        }
        partial_store_block(split, g, row0 + ty * 4u, col0 + tx * 4u, k_len, acc0, acc1, acc2, acc3, z);
    }
}

// ----- input gradient -----

// The workgroups of one z compute one stride phase (rumus/src/backend/wgpu/stride_phase.rs), the
// z-th of the dispatch's (`sizes`): the input rows h = first.x + j·stride_h (j < sub.x) and
// columns w = first.y + i·stride_w (i < sub.y), which all take the taps kh = tap.x + u·tap_step_h
// (u < tap_counts.x) and kw likewise; at stride 1, every row and every tap. Input pixel
// c = (n, j, i) of group g sits at padded position (hy, hx) = (h + pad_h, w + pad_w); tap
// (kh, kw) carries back the output gradient at ((hy - dy) / stride_h, (hx - dx) / stride_w) with
// (dy, dx) = (kh·dilation_h, kw·dilation_w), and within a phase both always divide exactly: with
// qy = hy / stride_h, the output row is qy - dy / stride_h. A pixel is (offset of
// grad[n, g·o/g, qy, qx], qy, qx, 0) and a tap (offset of its output channel from there,
// dy / stride_h, dx / stride_w, 0).
fn pixel(c: u32, g: u32, z: Sizes) -> vec4<i32> {
    let q = c % z.sub_plane;
    let qy = (z.first.x + q / z.sub.y * p.stride_h + p.pad_h) / p.stride_h;
    let qx = (z.first.y + q % z.sub.y * p.stride_w + p.pad_w) / p.stride_w;
    let base = (c / z.sub_plane * p.out_channels + g * z.og) * z.spatial + qy * p.out_w + qx;
    return vec4<i32>(i32(base), i32(qy), i32(qx), 0);
}

// The phase's tap t as (kh, kw).
fn phase_tap(t: u32, z: Sizes) -> vec2<u32> {
    return vec2<u32>(z.tap.x + t / z.tap_counts.y * p.tap_step_h, z.tap.y + t % z.tap_counts.y * p.tap_step_w);
}

// Tap k = (m, t) of the reduction, m an output channel of the group, t a tap of the phase.
fn grad_tap(k: u32, z: Sizes) -> vec4<i32> {
    let tap = phase_tap(k % z.phase_taps, z);
    let qy = tap.x * p.dilation_h / p.stride_h;
    let qx = tap.y * p.dilation_w / p.stride_w;
    return vec4<i32>(i32(k / z.phase_taps * z.spatial) - i32(qy * p.out_w + qx), i32(qy), i32(qx), 0);
}

// The output gradient that tap `t` carries back to pixel `pix` (if `ok`); zero where the output
// position falls outside the output.
fn grad_tap_at(pix: vec4<i32>, t: vec4<i32>, ok: bool) -> f32 {
    if ok && u32(pix.y - t.y) < p.out_h && u32(pix.z - t.z) < p.out_w {
        return grad[u32(pix.x + t.x)];
    }
    return 0.0;
}

// Weights W[o, c, kh, kw] as A [c, (m, kh, kw)]: rows c (`rows` valid from the tile's first),
// each k's offset from the table half `half`.
fn input_grad_a(base: u32, rows: u32, k_len: u32, k0: u32, half: u32, lid: u32, taps: u32) -> vec4<f32> {
    let r0 = kc_row(lid, 0u);
    let r2 = kc_row(lid, 2u);
    let k = kc_k(lid, 0u);
    let lo = kt_weight[half + k];
    let hi = kt_weight[half + k + 8u];
    return vec4<f32>(
        weight_at(base + lo + r0 * taps, r0 < rows && k0 + k < k_len),
        weight_at(base + hi + r0 * taps, r0 < rows && k0 + k + 8u < k_len),
        weight_at(base + lo + r2 * taps, r2 < rows && k0 + k < k_len),
        weight_at(base + hi + r2 * taps, r2 < rows && k0 + k + 8u < k_len),
    );
}

// This invocation's column (pixel `pix`) at slice rows gk, gk + 2, gk + 4, gk + 6 of the table
// half `half`...
fn input_grad_b4(pix: vec4<i32>, ok: bool, k_len: u32, k0: u32, half: u32, gk: u32) -> vec4<f32> {
    return vec4<f32>(
        grad_tap_at(pix, kt[half + gk], ok && k0 + gk < k_len),
        grad_tap_at(pix, kt[half + gk + 2u], ok && k0 + gk + 2u < k_len),
        grad_tap_at(pix, kt[half + gk + 4u], ok && k0 + gk + 4u < k_len),
        grad_tap_at(pix, kt[half + gk + 6u], ok && k0 + gk + 6u < k_len),
    );
}

// ...slice rows gk + 2t for t = 0..7.
fn input_grad_b(pix: vec4<i32>, ok: bool, k_len: u32, k0: u32, half: u32, gk: u32) -> Gathered {
    return Gathered(input_grad_b4(pix, ok, k_len, k0, half, gk), input_grad_b4(pix, ok, k_len, k0, half, gk + 8u));
}

// The table entries of slice row `k`: grad_tap, and the offset of W[m, 0, kh, kw] in the group.
fn input_grad_table(i: u32, k: u32, z: Sizes) {
    kt[i] = grad_tap(k, z);
    let tap = phase_tap(k % z.phase_taps, z);
    kt_weight[i] = k / z.phase_taps * z.cg * z.taps + tap.x * p.kernel_w + tap.y;
}

// Offset in out of column c (sample, pixel of the phase) at channel 0.
fn input_column(c: u32, z: Sizes) -> u32 {
    let q = c % z.sub_plane;
    let h = z.first.x + q / z.sub.y * p.stride_h;
    let w = z.first.y + q % z.sub.y * p.stride_w;
    return c / z.sub_plane * p.channels * z.plane + h * p.in_w + w;
}

// A 4×4 block of outputs (rows v0..v3) at rows r.., columns c.. (`n` inside).
fn input_store_block(r: u32, g: u32, c: u32, n: u32, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
                     z: Sizes) {
    let ic = vec4<u32>(input_column(c, z), input_column(c + 1u, z), input_column(c + 2u, z),
                       input_column(c + 3u, z));
    let ch = g * z.cg + r;
    if r < z.cg {
        store4(ch * z.plane, ic, n, v0);
    }
    if r + 1u < z.cg {
        store4((ch + 1u) * z.plane, ic, n, v1);
    }
    if r + 2u < z.cg {
        store4((ch + 2u) * z.plane, ic, n, v2);
    }
    if r + 3u < z.cg {
        store4((ch + 3u) * z.plane, ic, n, v3);
    }
}

@compute @workgroup_size(16, 16)
fn conv2d_input_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let z = sizes(wid.z);
    let k_len = z.og * z.phase_taps;
    let cols = p.batch * z.sub_plane;
    let tiles_m = div_up(z.cg, TILE);
    let tiles_n = div_up(cols, WIDE);
    let tx = lid % 16u;
    let ty = lid / 16u;
    let gk = lid / WIDE;
    // M tiles vary fastest: workgroups that gather the same gradients run side by side.
    for (var t = wid.x; t < tiles_m * tiles_n * p.groups; t += nwg.x) {
        let row0 = t % tiles_m * TILE;
        let col0 = t / tiles_m % tiles_n * WIDE;
        let g = t / (tiles_m * tiles_n);
        let col = col0 + lid % WIDE;
        let pix = pixel(col, g, z);
        let w_base = (g * z.og * z.cg + row0) * z.taps;
        let rows = z.cg - row0;
        let busy = block_inside(row0, col0, tx, ty, z.cg, cols);
        clear();
        if lid < BK {
            input_grad_table(lid, lid, z);
        }
        workgroupBarrier();
        var ra = input_grad_a(w_base, rows, k_len, 0u, 0u, lid, z.taps);
        var rb = input_grad_b(pix, col < cols, k_len, 0u, 0u, gk);
        var half = BK;
        for (var k0 = 0u; k0 < k_len; k0 += BK) {
            stash_a(ra, lid);
            stash_b_gathered(rb, lid);
            let next = k0 + BK;
            if lid < BK && next < k_len {
                input_grad_table(half + lid, next + lid, z);
            }
            workgroupBarrier();
            if next < k_len {
                ra = input_grad_a(w_base, rows, k_len, next, half, lid, z.taps);
                rb = input_grad_b(pix, col < cols, k_len, next, half, gk);
            }
            if busy {
                multiply_wide(tx, ty);
            }
            workgroupBarrier();
            half = BK - half;
        }
        let c = col0 + tx * 4u;
        let r = row0 + ty * 4u;
        input_store_block(r, g, c, inside(c, cols), acc0, acc1, acc2, acc3, z);
        input_store_block(r, g, c + TILE, inside(c + TILE, cols), acc4, acc5, acc6, acc7, z);
    }
}

// ----- large tiles: 128×128, 8×8 outputs per invocation -----
//
// The `_large` entry points compute the forward and input gradient on 128×128 tiles (the weight
// gradient keeps its 64×64 tiles, which were faster on an H100): each invocation holds four
// 4×4 blocks, at rows ty·4 and 64 + ty·4 and columns tx·4 and 64 + tx·4 of the tile, so every
// vec4 read from workgroup memory feeds 32 products (16 in the 64×128 tiles) and the reads stay
// conflict-free as above. Both operands' slices are [BK][128] (`ta_wide`, `tb_wide`): the
// gathered B is loaded exactly as the wide tiles', and the K-contiguous weights (A) as two
// halves of 64 rows, each loaded like the 64-row tiles'. 64 accumulators and 16 prefetched
// values per invocation stay within 128 registers, so two workgroups share an SM. Their slices
// take more than WebGPU's default 16 KiB of workgroup memory: conv2d.rs selects them only on
// adapters with more, and for GEMMs whose M side fills the 128 rows. Tiles are walked in groups
// of GROUP_ROWS tile rows, rows fastest, so the workgroups running at once share both operands'
// slices in L2.

const LARGE: u32 = 128u;
const GROUP_ROWS: u32 = 8u;

var<workgroup> ta_wide: array<vec4<f32>, 528>;

// Rows 64 + ty·4 + i of this invocation's large tile: columns tx·4.. (acc8..acc11) and
// 64 + tx·4.. (acc12..acc15); acc0..acc7 hold rows ty·4 + i as in the wide tiles.
var<private> acc8: vec4<f32>;
var<private> acc9: vec4<f32>;
var<private> acc10: vec4<f32>;
var<private> acc11: vec4<f32>;
var<private> acc12: vec4<f32>;
var<private> acc13: vec4<f32>;
var<private> acc14: vec4<f32>;
var<private> acc15: vec4<f32>;

fn clear_far_rows() {
    acc8 = vec4<f32>(0.0);
    acc9 = vec4<f32>(0.0);
    acc10 = vec4<f32>(0.0);
    acc11 = vec4<f32>(0.0);
    acc12 = vec4<f32>(0.0);
    acc13 = vec4<f32>(0.0);
    acc14 = vec4<f32>(0.0);
    acc15 = vec4<f32>(0.0);
}

// Tile t of a tiles_m × tiles_n grid, as (tile row, tile column): GROUP_ROWS tile rows at a time
// (fewer in the last group), rows fastest within a group.
fn grouped_tile(t: u32, tiles_m: u32, tiles_n: u32) -> vec2<u32> {
    let first = t / (GROUP_ROWS * tiles_n) * GROUP_ROWS;
    let rows = min(GROUP_ROWS, tiles_m - first);
    let i = t - first * tiles_n;
    return vec2<u32>(first + i % rows, i / rows);
}

fn put_a_wide(k: u32, r: u32, v: f32) {
    ta_wide[k * ROW_WIDE + r / 4u][r % 4u] = v;
}

// Stores loads 0..3 of the weights into rows r0 + kc_row(lid, t) of A: r0 is 0 or 64.
fn stash_a_wide(v: vec4<f32>, lid: u32, r0: u32) {
    put_a_wide(kc_k(lid, 0u), r0 + kc_row(lid, 0u), v.x);
    put_a_wide(kc_k(lid, 1u), r0 + kc_row(lid, 1u), v.y);
    put_a_wide(kc_k(lid, 2u), r0 + kc_row(lid, 2u), v.z);
    put_a_wide(kc_k(lid, 3u), r0 + kc_row(lid, 3u), v.w);
}

fn mac_large(k: u32, tx: u32, ty: u32) {
    let a = ta_wide[k * ROW_WIDE + ty];
    let a_far = ta_wide[k * ROW_WIDE + 16u + ty];
    let b = tb_wide[k * ROW_WIDE + tx];
    let b_far = tb_wide[k * ROW_WIDE + 16u + tx];
    acc0 = fma(vec4<f32>(a.x), b, acc0);
    acc1 = fma(vec4<f32>(a.y), b, acc1);
    acc2 = fma(vec4<f32>(a.z), b, acc2);
    acc3 = fma(vec4<f32>(a.w), b, acc3);
    acc4 = fma(vec4<f32>(a.x), b_far, acc4);
    acc5 = fma(vec4<f32>(a.y), b_far, acc5);
    acc6 = fma(vec4<f32>(a.z), b_far, acc6);
    acc7 = fma(vec4<f32>(a.w), b_far, acc7);
    acc8 = fma(vec4<f32>(a_far.x), b, acc8);
    acc9 = fma(vec4<f32>(a_far.y), b, acc9);
    acc10 = fma(vec4<f32>(a_far.z), b, acc10);
    acc11 = fma(vec4<f32>(a_far.w), b, acc11);
    acc12 = fma(vec4<f32>(a_far.x), b_far, acc12);
    acc13 = fma(vec4<f32>(a_far.y), b_far, acc13);
    acc14 = fma(vec4<f32>(a_far.z), b_far, acc14);
    acc15 = fma(vec4<f32>(a_far.w), b_far, acc15);
}

fn multiply_large(tx: u32, ty: u32) {
    mac_large(0u, tx, ty);
    mac_large(1u, tx, ty);
    mac_large(2u, tx, ty);
    mac_large(3u, tx, ty);
    mac_large(4u, tx, ty);
    mac_large(5u, tx, ty);
    mac_large(6u, tx, ty);
    mac_large(7u, tx, ty);
    mac_large(8u, tx, ty);
    mac_large(9u, tx, ty);
    mac_large(10u, tx, ty);
    mac_large(11u, tx, ty);
    mac_large(12u, tx, ty);
    mac_large(13u, tx, ty);
    mac_large(14u, tx, ty);
    mac_large(15u, tx, ty);
}

@compute @workgroup_size(16, 16)
fn conv2d_forward_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let z = sizes(0u);
    let k_len = z.cg * z.taps;
    let cols = p.batch * z.spatial;
    let tiles_m = div_up(z.og, LARGE);
    let tiles_n = div_up(cols, LARGE);
    let tiles = tiles_m * tiles_n;
    let tx = lid % 16u;
    let ty = lid / 16u;
    let gk = lid / LARGE;
    for (var t = wid.x; t < tiles * p.groups; t += nwg.x) {
        let tile = grouped_tile(t % tiles, tiles_m, tiles_n);
        let row0 = tile.x * LARGE;
        let col0 = tile.y * LARGE;
        let g = t / tiles;
        let col = col0 + lid % LARGE;
        let win = window(col / z.spatial, g * z.cg, col % z.spatial, z);
        // Weight rows row0.. and row0 + 64..: `rows` and `rows_far` of them valid.
        let w_base = (g * z.og + row0) * k_len;
        let w_far = w_base + TILE * k_len;
        let rows = z.og - row0;
        let rows_far = rows - min(rows, TILE);
        let busy = block_inside(row0, col0, tx, ty, z.og, cols);
        clear();
        clear_far_rows();
        if lid < BK {
            kt[lid] = tap(lid, z);
        }
        workgroupBarrier();
        var ra = forward_a(w_base, rows, k_len, 0u, lid);
        var ra_far = forward_a(w_far, rows_far, k_len, 0u, lid);
        var rb = forward_b(win, col < cols, k_len, 0u, 0u, gk);
        var half = BK;
        for (var k0 = 0u; k0 < k_len; k0 += BK) {
            stash_a_wide(ra, lid, 0u);
            stash_a_wide(ra_far, lid, TILE);
            stash_b_gathered(rb, lid);
            let next = k0 + BK;
            if lid < BK && next < k_len {
                kt[half + lid] = tap(next + lid, z);
            }
            workgroupBarrier();
            if next < k_len {
                ra = forward_a(w_base, rows, k_len, next, lid);
                ra_far = forward_a(w_far, rows_far, k_len, next, lid);
                rb = forward_b(win, col < cols, k_len, next, half, gk);
            }
            if busy {
                multiply_large(tx, ty);
            }
            workgroupBarrier();
            half = BK - half;
        }
        let c = col0 + tx * 4u;
        let c_far = c + TILE;
        let r = row0 + ty * 4u;
        let r_far = r + TILE;
        forward_store_block(r, g, c, inside(c, cols), acc0, acc1, acc2, acc3, z);
        forward_store_block(r, g, c_far, inside(c_far, cols), acc4, acc5, acc6, acc7, z);
        forward_store_block(r_far, g, c, inside(c, cols), acc8, acc9, acc10, acc11, z);
        forward_store_block(r_far, g, c_far, inside(c_far, cols), acc12, acc13, acc14, acc15, z);
    }
}

@compute @workgroup_size(16, 16)
fn conv2d_input_grad_large(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lid: u32) {
    let z = sizes(wid.z);
    let k_len = z.og * z.phase_taps;
    let cols = p.batch * z.sub_plane;
    let tiles_m = div_up(z.cg, LARGE);
    let tiles_n = div_up(cols, LARGE);
    let tiles = tiles_m * tiles_n;
    let tx = lid % 16u;
    let ty = lid / 16u;
    let gk = lid / LARGE;
    for (var t = wid.x; t < tiles * p.groups; t += nwg.x) {
        let tile = grouped_tile(t % tiles, tiles_m, tiles_n);
        let row0 = tile.x * LARGE;
        let col0 = tile.y * LARGE;
        let g = t / tiles;
        let col = col0 + lid % LARGE;
        let pix = pixel(col, g, z);
        // Weight rows (input channels) row0.. and row0 + 64..: `rows` and `rows_far` valid.
        let w_base = (g * z.og * z.cg + row0) * z.taps;
        let w_far = w_base + TILE * z.taps;
        let rows = z.cg - row0;
        let rows_far = rows - min(rows, TILE);
        let busy = block_inside(row0, col0, tx, ty, z.cg, cols);
        clear();
        clear_far_rows();
        if lid < BK {
            input_grad_table(lid, lid, z);
        }
        workgroupBarrier();
        var ra = input_grad_a(w_base, rows, k_len, 0u, 0u, lid, z.taps);
        var ra_far = input_grad_a(w_far, rows_far, k_len, 0u, 0u, lid, z.taps);
        var rb = input_grad_b(pix, col < cols, k_len, 0u, 0u, gk);
        var half = BK;
        for (var k0 = 0u; k0 < k_len; k0 += BK) {
            stash_a_wide(ra, lid, 0u);
            stash_a_wide(ra_far, lid, TILE);
            stash_b_gathered(rb, lid);
            let next = k0 + BK;
            if lid < BK && next < k_len {
                input_grad_table(half + lid, next + lid, z);
            }
            workgroupBarrier();
            if next < k_len {
                ra = input_grad_a(w_base, rows, k_len, next, half, lid, z.taps);
                ra_far = input_grad_a(w_far, rows_far, k_len, next, half, lid, z.taps);
                rb = input_grad_b(pix, col < cols, k_len, next, half, gk);
            }
            if busy {
                multiply_large(tx, ty);
            }
            workgroupBarrier();
            half = BK - half;
        }
        let c = col0 + tx * 4u;
        let c_far = c + TILE;
        let r = row0 + ty * 4u;
        let r_far = r + TILE;
        input_store_block(r, g, c, inside(c, cols), acc0, acc1, acc2, acc3, z);
        input_store_block(r, g, c_far, inside(c_far, cols), acc4, acc5, acc6, acc7, z);
        input_store_block(r_far, g, c, inside(c, cols), acc8, acc9, acc10, acc11, z);
        input_store_block(r_far, g, c_far, inside(c_far, cols), acc12, acc13, acc14, acc15, z);
    }
}
