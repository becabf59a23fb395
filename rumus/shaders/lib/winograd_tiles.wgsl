// What both Winograd convolutions share (`winograd.wgsl`, F(2×2, 3×3), and `winograd4.wgsl`,
// F(4×4, 3×3)): parameters and bindings, where an invocation works, filter taps, tile loads,
// and the entry points that transform input and output-gradient tiles. Each includer defines
// `const TILE: u32`, the side of its output tiles, `alias Transformed` (one tile's transformed
// values), `transformed_input_tile` and `transformed_grad_tile` (a tile at a `TileOrigin`,
// loaded and transformed) and `store_transformed` (a tile's values to their planes).
//
// Tiles are numbered p = (n·tiles_h + ty)·tiles_w + tx, P = batch·tiles_h·tiles_w of them. The
// forward's tile matrix V is [ξ, c, cols] (cols: P rounded up to 4), M is [ξ, o, cols]. The
// weight gradient's tile matrices are tile-major, [ξ, cols, rows] with rows = C or O rounded
// up to 8 and cols = slices·slice_len: each slice of P is a contiguous [slice_len, rows] block,
// so the product over P splits into a batch of ξ·slices products `[rows_z, slice_len] @
// [slice_len, rows_v]` whose left operand is read transposed (contiguous along its rows) and
// right one row-major: both land in the matmul kernels' shared memory as they are read, vec4
// by vec4, and the backend's reduction adds up the partial sums. Rows and columns past C, O or
// P are written as zeros. One invocation per (row, p) or per (o, c), on a 2-D grid of 256-wide
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
    // Rows of the tile matrix this dispatch writes or reads (C for V, O for M; C or O rounded
    // up to 8 for the weight gradient's Vt and Zt, and dU's rows).
    rows: u32,
    // Columns: P rounded up (dU: its row length, C rounded up to 8).
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

// Element (row, p) of the forward's tile matrix V [rows, cols] for ξ = 0 is invocation i itself.
struct TileColumn {
    row: u32,
    // The tile p, or P and beyond for the zero padding of the last columns.
    tile: u32,
}

fn tile_column(i: u32) -> TileColumn {
    return TileColumn(i / p.cols, i % p.cols);
}

// Where invocation i of a tile-major transform works: channel `row` of tile `tile`, writing
// element `at` of the ξ = 0 plane [cols, rows]. A 32-wide subgroup covers 8 consecutive
// channels of 4 consecutive tiles: its reads stay as local as one channel's 32 tiles (4 tiles
// of 8 planes instead of 32 tiles of one), and each of its 16 stores writes 4 whole 32-byte
// rows of the plane (rows is a multiple of 8, cols of 4).
struct TileMajor {
    row: u32,
    tile: u32,
    at: u32,
}

fn tile_major(i: u32) -> TileMajor {
    let row_lo = i % 8u;
    let t = i / 8u;
    let tile_lo = t % 4u;
    let u = t / 4u;
    let groups = p.rows / 8u;
    let row = (u % groups) * 8u + row_lo;
    let tile = (u / groups) * 4u + tile_lo;
    return TileMajor(row, tile, tile * p.rows + row);
}

// The 3×3 filter of (o, c) of the convolution computed, read from `src`.
fn filter_tap(o: u32, c: u32, r: u32, s: u32) -> f32 {
    if p.flip != 0u {
        // The forward weight is [C', O', 3, 3] with C' = out_channels here, O' = channels.
        return src[((c * p.out_channels + o) * 3u + 2u - r) * 3u + 2u - s];
    }
    return src[((o * p.channels + c) * 3u + r) * 3u + s];
}

// Where tile `tile` of `row`'s plane in `src` [batch, chans, h, w] starts: the plane's offset and
// the tile's top-left corner, signed, since an input tile may start above or left of the image by
// the padding.
struct TileOrigin {
    plane: u32,
    y: i32,
    x: i32,
}

fn tile_origin(chans: u32, row: u32, tile: u32, h: u32, w: u32, pad_h: u32, pad_w: u32) -> TileOrigin {
    let tx = tile % p.tiles_w;
    let ty = (tile / p.tiles_w) % p.tiles_h;
    let b = tile / (p.tiles_w * p.tiles_h);
    return TileOrigin((b * chans + row) * h * w, i32(TILE * ty) - i32(pad_h), i32(TILE * tx) - i32(pad_w));
}

// Element (y, x) of the plane at `plane`, zero outside h × w.
fn tap(plane: u32, y: i32, x: i32, h: u32, w: u32) -> f32 {
    if y < 0 || y >= i32(h) || x < 0 || x >= i32(w) {
        return 0.0;
    }
    return src[plane + u32(y) * w + u32(x)];
}

// Where invocation i = o·P + tile of an output transform works: filter o and tile `tile`, whose
// products start at element `at` of the ξ = 0 plane of M [ξ, O, cols]; the output plane at
// `base`, the tile's top-left output (y0, x0), and the bias to add (0 without one).
struct OutputTile {
    o: u32,
    at: u32,
    base: u32,
    y0: u32,
    x0: u32,
    bias: f32,
}

fn output_tile(i: u32) -> OutputTile {
    let tiles = p.batch * p.tiles_h * p.tiles_w;
    let o = i / tiles;
    let tile = i % tiles;
    var b = 0.0;
    if p.has_bias != 0u {
        b = bias[o];
    }
    let tx = tile % p.tiles_w;
    let ty = (tile / p.tiles_w) % p.tiles_h;
    let n = tile / (p.tiles_w * p.tiles_h);
    return OutputTile(o, o * p.cols + tile, (n * p.out_channels + o) * p.out_h * p.out_w, TILE * ty, TILE * tx, b);
}

// The weight gradient's transformed input tile `tile` of channel `row`; zeros for the padding
// rows (from C) and tiles (from P) of its tile-major matrix.
fn wgrad_input_tile(row: u32, tile: u32) -> Transformed {
    var v: Transformed;
    if tile < p.batch * p.tiles_h * p.tiles_w && row < p.channels {
        let o = tile_origin(p.channels, row, tile, p.in_h, p.in_w, p.pad_h, p.pad_w);
        v = transformed_input_tile(o, p.in_h, p.in_w);
    }
    return v;
}

// The weight gradient's transformed output-gradient tile `tile` of channel `row` (no padding,
// zeros beyond out_h × out_w); zeros for the padding rows (from O) and tiles (from P).
fn wgrad_grad_tile(row: u32, tile: u32) -> Transformed {
    var z: Transformed;
    if tile < p.batch * p.tiles_h * p.tiles_w && row < p.out_channels {
        let o = tile_origin(p.out_channels, row, tile, p.out_h, p.out_w, 0u, 0u);
        z = transformed_grad_tile(o, p.out_h, p.out_w);
    }
    return z;
}

@compute @workgroup_size(256)
fn winograd_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let at = tile_column(i);
    var v: Transformed;
    if at.tile < p.batch * p.tiles_h * p.tiles_w {
        let o = tile_origin(p.rows, at.row, at.tile, p.in_h, p.in_w, p.pad_h, p.pad_w);
        v = transformed_input_tile(o, p.in_h, p.in_w);
    }
    store_transformed(v, i, p.rows * p.cols);
}

@compute @workgroup_size(256)
fn winograd_input_wgrad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let at = tile_major(i);
    store_transformed(wgrad_input_tile(at.row, at.tile), at.at, p.rows * p.cols);
}

@compute @workgroup_size(256)
fn winograd_grad_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = invocation(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let at = tile_major(i);
    store_transformed(wgrad_grad_tile(at.row, at.tile), at.at, p.rows * p.cols);
}
