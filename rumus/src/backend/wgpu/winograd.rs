//! Winograd F(2×2, 3×3) and F(4×4, 3×3) convolutions: dispatch of the transforms in
//! `winograd.wgsl` or `winograd4.wgsl` around 16 or 36 batched products on the backend's matmul
//! kernels (`matmul.rs`), for the forward, the input
//! gradient (the forward of the output gradient with the filters rotated and transposed, which
//! the filter transform reads in place) and the weight gradient (its product over the tiles,
//! on tile-major operands, split into slices whose partials the backend's reduction adds up;
//! the kernel and split are [`weight_grad_plan`]'s). Which convolutions come here:
//! `conv_algorithm.rs`. The transforms are checked against a direct convolution by
//! `tools/gen/winograd_transforms.py`.

use super::conv_algorithm::{
    auto_picks_winograd, winograd_eligible, winograd_products_on_tensor_cores, ConvAlgorithm, ConvPass, WinogradTile,
};
use super::launch::bind;
use super::matmul::{
    MatmulKernel, MatmulPlan, PARTIAL_OUTPUTS_PER_K_STEP, VEC4_LARGE_TILE, VEC4_SQUARE_TILE, VEC4_TALL_TILE, WAVE_SMS,
};
use super::params::kernel_params;
use super::pipelines::{self, Access, Shader};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{Conv2dArgs, DType, MatmulArgs, MatrixLayout, ReduceDims, ReduceOp, Storage};
use crate::{Error, MatmulPrecision, Result};

const OP: &str = "conv2d (winograd)";
/// Bindings of every entry point: src, bias, out (the bias only in `winograd_output`).
const SIGNATURE: [Access; 3] = [Access::Read, Access::Read, Access::Write];
/// Every element count of a buffer the kernels index stays below this, so their u32 index
/// arithmetic (an element plus a few planes) stays below 2^31.
const INDEX_LIMIT: u64 = 1 << 30;
/// The weight gradient's products (`[O, P] @ [P, C]` per position, P tiles long) on 64×64
/// tiles are split along P until about this many of their output tiles are computed at once...
const SPLIT_TARGET_GROUPS: usize = 1024;
/// ...in slices of at least this many tiles.
const MIN_SLICE: usize = 256;
/// The weight gradient's tile matrices have C or O rounded up to this many rows: the matmul's
/// vec4 loads need a multiple of 4, and the transforms' stores write 8 rows (32 bytes) at once.
const WGRAD_ROW_ALIGN: usize = 8;
/// f32 rates (TFLOP/s, H100, docs/BENCHMARKS.md) that [`weight_grad_plan`] weighs the tiles'
/// wasted outputs with: the vec4 64×64 tiles ran 27–30 at 1024³–2048³, the 128×256 and
/// 256×128 ones 40–42 at 4096³, the 128×128 one (as a lab copy) 37–40.
const RATE_TILE64: usize = 28;
const RATE_LARGE: usize = 41;
const RATE_SQUARE: usize = 39;

kernel_params! {
    /// `winograd.wgsl`: `n` invocations over the convolution the forward computes (`channels`
    /// in, `out_channels` out) and the tile matrix they read or write (`rows` × `cols`, or
    /// `cols` × `rows` tile-major).
    struct WinogradParams {
        n: u32,
        batch: u32,
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
        rows: u32,
        cols: u32,
        flip: u32,
        has_bias: u32,
    }
}

/// The weight gradient's tile-major transforms: of the input, and of the output gradient.
#[derive(Clone, Copy, Debug)]
enum TileMajor {
    Input,
    Grad,
}

/// Invocations of a staged tile-major transform (`winograd4.wgsl`) over a `[ξ, cols, rows]`
/// matrix: 256 per block of 32 rows × 8 tiles.
fn staged_invocations(rows: usize, cols: usize) -> usize {
    rows.div_ceil(32) * cols.div_ceil(8) * 256
}

/// The stride-1 3×3 convolution the forward kernels compute: the layer's own, or its input
/// gradient's, on the tiles of `tile`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    tile: WinogradTile,
    batch: usize,
    channels: usize,
    out_channels: usize,
    in_h: usize,
    in_w: usize,
    pad_h: usize,
    pad_w: usize,
    out_h: usize,
    out_w: usize,
}

impl Shape {
    fn forward(a: &Conv2dArgs, tile: WinogradTile) -> Shape {
        let g = &a.geom;
        Shape {
            tile,
            batch: g.batch,
            channels: g.channels,
            out_channels: a.out_channels,
            in_h: g.in_h,
            in_w: g.in_w,
            pad_h: g.pad_h,
            pad_w: g.pad_w,
            out_h: g.out_h,
            out_w: g.out_w,
        }
    }

    /// dx = the convolution of dy ([n, o, oh, ow]) with w rotated 180° and transposed, padded by
    /// 2 − pad: its output is [n, c, h, w] (`winograd_eligible` keeps pad ≤ 2).
    fn input_grad(a: &Conv2dArgs, tile: WinogradTile) -> Shape {
        let g = &a.geom;
        Shape {
            tile,
            batch: g.batch,
            channels: a.out_channels,
            out_channels: g.channels,
            in_h: g.out_h,
            in_w: g.out_w,
            pad_h: 2 - g.pad_h,
            pad_w: 2 - g.pad_w,
            out_h: g.in_h,
            out_w: g.in_w,
        }
    }

    fn tiles_h(&self) -> usize {
        self.out_h.div_ceil(self.tile.side())
    }

    fn tiles_w(&self) -> usize {
        self.out_w.div_ceil(self.tile.side())
    }

    /// Transformed positions per tile: the batch of products.
    fn xi(&self) -> usize {
        self.tile.positions()
    }

    /// The shader of its transforms.
    fn shader(&self) -> &'static Shader {
        match self.tile {
            WinogradTile::F2x2 => &pipelines::WINOGRAD,
            WinogradTile::F4x4 => &pipelines::WINOGRAD4,
        }
    }

    /// P: the output tiles of the whole batch.
    fn tiles(&self) -> usize {
        self.batch * self.tiles_h() * self.tiles_w()
    }

    /// Columns of the forward's tile matrices: P rounded up to a multiple of 4, so the products
    /// can take the vec4 matmul kernels.
    fn forward_cols(&self) -> usize {
        self.tiles().next_multiple_of(4)
    }

    /// The output transform's entry point: `winograd_output_vec4` on F(4×4, 3×3) when the
    /// output's rows are a multiple of 4 wide.
    fn output_entry(&self) -> &'static str {
        if self.tile == WinogradTile::F4x4 && self.out_w.is_multiple_of(4) {
            "winograd_output_vec4"
        } else {
            "winograd_output"
        }
    }

    /// The entry point of the weight gradient's tile-major transform of `which` into a
    /// `[ξ, cols, rows]` matrix, and its invocations: on F(4×4, 3×3) the `_staged` one, whose
    /// workgroups of 256 take blocks of 32 rows × 8 tiles; else one invocation per element.
    fn tile_major(&self, which: TileMajor, rows: usize, cols: usize) -> (&'static str, usize) {
        let staged = self.tile == WinogradTile::F4x4;
        let entry = match (which, staged) {
            (TileMajor::Input, false) => "winograd_input_wgrad",
            (TileMajor::Input, true) => "winograd_input_wgrad_staged",
            (TileMajor::Grad, false) => "winograd_grad_tiles",
            (TileMajor::Grad, true) => "winograd_grad_tiles_staged",
        };
        (entry, if staged { staged_invocations(rows, cols) } else { rows * cols })
    }

    /// Parameters for `n` invocations over a tile matrix of `rows` × `cols`.
    fn params(&self, n: usize, rows: usize, cols: usize) -> WinogradParams {
        let v = |x: usize| x as u32;
        WinogradParams {
            n: v(n),
            batch: v(self.batch),
            channels: v(self.channels),
            out_channels: v(self.out_channels),
            in_h: v(self.in_h),
            in_w: v(self.in_w),
            out_h: v(self.out_h),
            out_w: v(self.out_w),
            pad_h: v(self.pad_h),
            pad_w: v(self.pad_w),
            tiles_h: v(self.tiles_h()),
            tiles_w: v(self.tiles_w()),
            rows: v(rows),
            cols: v(cols),
            flip: 0,
            has_bias: 0,
        }
    }
}

/// How the weight gradient's ξ products `[m, P] @ [P, n]` (one per transformed position: 16 or
/// 36) run (m = O and n = C rounded up to [`WGRAD_ROW_ALIGN`]): the matmul kernel, and the P
/// tiles cut into `slices` of `slice_len` (a multiple of 4; `slices · slice_len ≥ P`), computed
/// as one batch of `ξ · slices` products whose partial sums are added up afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WeightGradPlan {
    kernel: MatmulKernel,
    slices: usize,
    slice_len: usize,
}

impl WeightGradPlan {
    /// About `wanted` slices of `tiles`: the fewest of length a multiple of 4 that hold them.
    fn new(kernel: MatmulKernel, tiles: usize, wanted: usize) -> WeightGradPlan {
        let slice_len = tiles.div_ceil(wanted.max(1)).next_multiple_of(4);
        WeightGradPlan { kernel, slices: tiles.div_ceil(slice_len), slice_len }
    }

    /// The tile matrices' columns: the tiles, padded.
    fn cols(&self) -> usize {
        self.slices * self.slice_len
    }
}

/// The weight gradient's plan for `tiles` tiles and `[m, n]` outputs at each of `xi` positions, where
/// `large` says whether the adapter runs the vec4 128×256 and 256×128 tiles. Of those and the
/// vec4 128×128 tile (which fits WebGPU's defaults), the one whose rate ([`RATE_LARGE`],
/// [`RATE_SQUARE`]) times the share of its outputs inside `[m, n]` is highest, if that beats
/// the 64×64 tile's ([`RATE_TILE64`]) likewise: at 128 × 128 half of a 128×256 tile's outputs
/// are padding, at 64 × 64 seven eighths are (before this plan the dispatcher put these
/// batches of 256 or more products on the 128×256 tiles). Those tiles take the slice count of
/// fewest waves of workgroups (one per SM of [`WAVE_SMS`] for 512 invocations, two for the
/// 128×128 tile's 256) times slice length, plus the partials' round trip
/// ([`PARTIAL_OUTPUTS_PER_K_STEP`]); the 64×64 tiles about [`SPLIT_TARGET_GROUPS`] workgroups.
/// Slices are at least [`MIN_SLICE`] long; a side under 16 runs one invocation per output,
/// split like the 64×64 tiles. To be tuned with the H100 timings.
fn weight_grad_plan(xi: usize, m: usize, n: usize, tiles: usize, large: bool) -> WeightGradPlan {
    let most_slices = (tiles / MIN_SLICE).max(1);
    let useful =
        |[rows, cols]: [usize; 2]| (m * n) as f64 / (m.next_multiple_of(rows) * n.next_multiple_of(cols)) as f64;
    let small = if m < 16 || n < 16 { MatmulKernel::PerOutput } else { MatmulKernel::Tile64 };
    let per_split = xi * m.div_ceil(64) * n.div_ceil(64);
    let tile64 = WeightGradPlan::new(small, tiles, SPLIT_TARGET_GROUPS.div_ceil(per_split).clamp(1, most_slices));
    if small == MatmulKernel::PerOutput {
        return tile64;
    }
    // (kernel, tile, rate, workgroups per SM); ties go to the earlier.
    let mut candidates = vec![(MatmulKernel::Square, VEC4_SQUARE_TILE, RATE_SQUARE, 2)];
    if large {
        candidates.insert(0, (MatmulKernel::Tall, VEC4_TALL_TILE, RATE_LARGE, 1));
        candidates.insert(0, (MatmulKernel::Wide, VEC4_LARGE_TILE, RATE_LARGE, 1));
    }
    let score = |tile: [usize; 2], rate: usize| useful(tile) * rate as f64;
    let mut best = candidates[0];
    for c in candidates {
        if score(c.1, c.2) > score(best.1, best.2) {
            best = c;
        }
    }
    let (kernel, tile, rate, per_sm) = best;
    if score(tile, rate) < score([64, 64], RATE_TILE64) {
        return tile64;
    }
    let groups = xi * m.div_ceil(tile[0]) * n.div_ceil(tile[1]);
    let cost = |wanted: usize| {
        let plan = WeightGradPlan::new(kernel, tiles, wanted);
        let partials = if plan.slices > 1 { plan.slices * xi * m * n / PARTIAL_OUTPUTS_PER_K_STEP } else { 0 };
        ((groups * plan.slices).div_ceil(WAVE_SMS * per_sm) * plan.slice_len + partials, plan.slices)
    };
    let slices = (1..=most_slices).map(cost).min().map_or(1, |(_, slices)| slices);
    WeightGradPlan::new(kernel, tiles, slices)
}

/// The plan of the forward's products `[o, c] @ [c, cols]`: the dispatcher's (`dispatcher`),
/// unless it is a large tile whose rows `o` fills so little that the 64×64 tile does better,
/// rate ([`RATE_LARGE`], [`RATE_SQUARE`] against [`RATE_TILE64`]) times the share of its rows
/// inside `o`: 64 output channels leave a 128-row tile half idle (ResNet's first stage), where
/// the dispatcher, counting waves of workgroups, takes the 128×256 tile.
fn forward_products_plan(dispatcher: MatmulPlan, o: usize) -> MatmulPlan {
    let (rows, rate) = match dispatcher.kernel {
        MatmulKernel::Wide => (VEC4_LARGE_TILE[0], RATE_LARGE),
        MatmulKernel::Tall => (VEC4_TALL_TILE[0], RATE_LARGE),
        MatmulKernel::Square => (VEC4_SQUARE_TILE[0], RATE_SQUARE),
        MatmulKernel::Tile64 | MatmulKernel::PerOutput => return dispatcher,
    };
    let useful = |rows: usize| o as f64 / o.next_multiple_of(rows) as f64;
    if dispatcher.slices == 1 && useful(rows) * (rate as f64) < useful(64) * RATE_TILE64 as f64 {
        MatmulPlan { kernel: MatmulKernel::Tile64, slices: 1 }
    } else {
        dispatcher
    }
}

/// The weight gradient's rows: `[m, n]` = O and C rounded up to [`WGRAD_ROW_ALIGN`].
fn weight_grad_rows(s: &Shape) -> (usize, usize) {
    (s.out_channels.next_multiple_of(WGRAD_ROW_ALIGN), s.channels.next_multiple_of(WGRAD_ROW_ALIGN))
}

/// Element counts of every buffer the three passes of `a` index: inputs, outputs, transformed
/// filters and tiles, products and partial sums, named.
fn extents(a: &Conv2dArgs, tile: WinogradTile) -> [(&'static str, u64); 8] {
    let f = Shape::forward(a, tile);
    let b = Shape::input_grad(a, tile);
    let v = |x: usize| x as u64;
    let (o, c) = (v(f.out_channels), v(f.channels));
    let (m, n) = weight_grad_rows(&f);
    // Either plan's columns and partial sums, whichever the adapter takes.
    let plans = [false, true].map(|large| weight_grad_plan(f.xi(), m, n, f.tiles(), large));
    let split_cols = plans.iter().map(|p| v(p.cols())).max().unwrap_or(0);
    let slices = plans.iter().map(|p| v(p.slices)).max().unwrap_or(0);
    let (m, n) = (v(m), v(n));
    let xi = v(f.xi());
    let big = |parts: &[u64]| parts.iter().fold(1u64, |acc, &p| acc.saturating_mul(p));
    [
        ("input", big(&[v(f.batch), c, v(f.in_h), v(f.in_w)])),
        ("output", big(&[v(f.batch), o, v(f.out_h), v(f.out_w)])),
        ("forward input tiles", big(&[xi, c, v(f.forward_cols())])),
        ("forward products", big(&[xi, o, v(f.forward_cols())])),
        ("input gradient tiles", big(&[xi, o, v(b.forward_cols())])),
        ("input gradient products", big(&[xi, c, v(b.forward_cols())])),
        ("weight gradient tiles", big(&[xi, m.max(n), split_cols])),
        ("weight gradient partial sums", big(&[xi, slices, m, n])),
    ]
}

impl WgpuBackend {
    /// A backend of its own on the shared device (like [`WgpuBackend::independent`]) whose
    /// convolutions run on `algorithm` instead of the one `RUMUS_WGPU_CONV` names: to compare
    /// the algorithms in one process, or to force one. Its tensors do not mix with other
    /// backends' (move them with `to`).
    pub fn with_conv_algorithm(algorithm: ConvAlgorithm) -> Result<WgpuBackend> {
        let mut backend = WgpuBackend::independent()?;
        backend.conv_algorithm = algorithm;
        Ok(backend)
    }

    /// The algorithm this backend's convolutions run on (see [`ConvAlgorithm`]).
    pub fn conv_algorithm(&self) -> ConvAlgorithm {
        self.conv_algorithm
    }

    /// Which Winograd tiles `pass` of `a` runs on, if any: `Auto`'s rule where the buffers fit;
    /// where `Winograd` or `Winograd4x4` is forced on an eligible convolution, its tiles, and an
    /// error if they do not fit.
    pub(super) fn conv_winograd(&self, a: &Conv2dArgs, pass: ConvPass) -> Result<Option<WinogradTile>> {
        let forced = |tile: WinogradTile| match winograd_eligible(a) {
            true => self.winograd_fits(a, tile).map(|()| Some(tile)),
            false => Ok(None),
        };
        match self.conv_algorithm {
            ConvAlgorithm::ImplicitGemm => Ok(None),
            ConvAlgorithm::Auto => {
                let tensor_cores = self.matmul_precision() == MatmulPrecision::F16TensorCores;
                let tile = auto_picks_winograd(a, pass, self.ctx.is_hardware(), tensor_cores);
                Ok(tile.filter(|&tile| self.winograd_fits(a, tile).is_ok()))
            }
            ConvAlgorithm::Winograd => forced(WinogradTile::F2x2),
            ConvAlgorithm::Winograd4x4 => forced(WinogradTile::F4x4),
        }
    }

    /// `Ok` when every buffer of the three passes on `tile` stays inside the kernels' 32-bit
    /// indexing and the adapter's largest storage binding; else an error naming the buffer.
    fn winograd_fits(&self, a: &Conv2dArgs, tile: WinogradTile) -> Result<()> {
        let binding = self.ctx.limits.max_storage_buffer_binding_size.min(self.ctx.limits.max_buffer_size) / 4;
        for (what, len) in extents(a, tile) {
            if len > INDEX_LIMIT || len > binding {
                return Err(Error::Gpu(format!(
                    "{OP}: the {what} would take {len} elements, beyond the 32-bit indexing of the Winograd kernels \
                     ({INDEX_LIMIT}) or the adapter's largest buffer ({binding}); use ConvAlgorithm::ImplicitGemm \
                     (RUMUS_WGPU_CONV=gemm)"
                )));
            }
        }
        Ok(())
    }

    /// The forward on `tile`: y = conv(x, w) + bias, y as [n, o, oh, ow].
    pub(super) fn winograd_forward(
        &self,
        x: &WgpuStorage,
        w: &WgpuStorage,
        bias: Option<&WgpuStorage>,
        a: &Conv2dArgs,
        tile: WinogradTile,
    ) -> Result<Storage> {
        self.winograd_convolution(x, w, bias, &Shape::forward(a, tile), false)
    }

    /// dx on `tile`: the forward of the output gradient with the filters read rotated and
    /// transposed.
    pub(super) fn winograd_input_grad(
        &self,
        w: &WgpuStorage,
        grad: &WgpuStorage,
        a: &Conv2dArgs,
        tile: WinogradTile,
    ) -> Result<Storage> {
        self.winograd_convolution(grad, w, None, &Shape::input_grad(a, tile), true)
    }

    /// Filter transform, input transform, ξ products, output transform.
    fn winograd_convolution(
        &self,
        x: &WgpuStorage,
        w: &WgpuStorage,
        bias: Option<&WgpuStorage>,
        s: &Shape,
        flip: bool,
    ) -> Result<Storage> {
        let (o, c, cols, tiles, xi) = (s.out_channels, s.channels, s.forward_cols(), s.tiles(), s.xi());
        let filters = self.alloc(xi * o * c, DType::F32, OP)?;
        let params = WinogradParams { flip: flip as u32, ..s.params(o * c, o, c) };
        self.winograd_run(s, "winograd_filter", &params, w, &filters)?;

        let input_tiles = self.alloc(xi * c * cols, DType::F32, OP)?;
        let params = s.params(c * cols, c, cols);
        self.winograd_run(s, "winograd_input", &params, x, &input_tiles)?;

        // M[ξ] = U[ξ] @ V[ξ]: [o, c] @ [c, cols], one per position.
        let products = MatmulArgs {
            batch: xi,
            m: o,
            k: c,
            n: cols,
            lhs: MatrixLayout { offset: 0, batch_stride: o * c, row_stride: c, col_stride: 1 },
            rhs: MatrixLayout { offset: 0, batch_stride: c * cols, row_stride: cols, col_stride: 1 },
        };
        let (filters, input_tiles) = (self.output(filters), self.output(input_tiles));
        let plan = forward_products_plan(self.matmul_plan(&products), o);
        let m = self.matmul_at(&filters, &input_tiles, &products, plan, self.products_precision(s))?;
        let m = self.gpu(&m, DType::F32, OP)?;

        let out = self.alloc(s.batch * o * s.out_h * s.out_w, DType::F32, OP)?;
        let params = WinogradParams { has_bias: bias.is_some() as u32, ..s.params(o * tiles, o, cols) };
        let buffers = [bind(m), bias.map_or(self.unused(), bind), bind(&out)];
        let groups = self.groups_for(o * tiles, OP)?;
        self.run(s.shader(), s.output_entry(), &SIGNATURE, &params, &buffers, groups)?;
        Ok(self.output(out))
    }

    /// dw on `tile`: Zt from the output gradient's tiles and Vt from the input's, tile-major,
    /// split along the tiles as [`weight_grad_plan`] says; dU[ξ] = Σ_slices Zt[ξ]ᵀ @ Vt[ξ];
    /// dw = Gᵀ dU G.
    pub(super) fn winograd_weight_grad(
        &self,
        x: &WgpuStorage,
        grad: &WgpuStorage,
        a: &Conv2dArgs,
        tile: WinogradTile,
    ) -> Result<Storage> {
        let s = Shape::forward(a, tile);
        let (o, c, xi) = (s.out_channels, s.channels, s.xi());
        let (m, n) = weight_grad_rows(&s);
        let plan = weight_grad_plan(xi, m, n, s.tiles(), self.large_tiles_fit());
        let (slices, slice_len, cols) = (plan.slices, plan.slice_len, plan.cols());

        let input_tiles = self.alloc(xi * n * cols, DType::F32, OP)?;
        let (entry, invocations) = s.tile_major(TileMajor::Input, n, cols);
        self.winograd_run(&s, entry, &s.params(invocations, n, cols), x, &input_tiles)?;
        let grad_tiles = self.alloc(xi * m * cols, DType::F32, OP)?;
        let (entry, invocations) = s.tile_major(TileMajor::Grad, m, cols);
        self.winograd_run(&s, entry, &s.params(invocations, m, cols), grad, &grad_tiles)?;

        // Batch entry ξ·slices + slice: [m, slice_len] @ [slice_len, n], the left operand Zt's
        // block read transposed (contiguous along m), the right one Vt's block as it is.
        let products = MatmulArgs {
            batch: xi * slices,
            m,
            k: slice_len,
            n,
            lhs: MatrixLayout { offset: 0, batch_stride: slice_len * m, row_stride: 1, col_stride: m },
            rhs: MatrixLayout { offset: 0, batch_stride: slice_len * n, row_stride: n, col_stride: 1 },
        };
        let unsplit = MatmulPlan { kernel: plan.kernel, slices: 1 };
        let (grad_tiles, input_tiles) = (self.output(grad_tiles), self.output(input_tiles));
        let partials = self.matmul_at(&grad_tiles, &input_tiles, &products, unsplit, self.products_precision(&s))?;
        let du = if slices == 1 {
            partials
        } else {
            self.reduce_kernel(ReduceOp::Sum, &partials, ReduceDims { outer: xi, len: slices, inner: m * n })?
        };
        let du = self.gpu(&du, DType::F32, OP)?;
        let out = self.alloc(o * c * 9, DType::F32, OP)?;
        self.winograd_run(&s, "winograd_filter_grad", &s.params(o * c, m, n), du, &out)?;
        Ok(self.output(out))
    }

    /// The precision of the products of a convolution of shape `s`: the backend's, but f32
    /// where tensor cores would waste most of their tile (`winograd_products_on_tensor_cores`).
    fn products_precision(&self, s: &Shape) -> MatmulPrecision {
        if winograd_products_on_tensor_cores(s.channels, s.out_channels) {
            self.matmul_precision()
        } else {
            MatmulPrecision::F32
        }
    }

    /// One transform of `s`'s shader over `params.n` invocations, from `src` into `out` (no
    /// bias).
    fn winograd_run(
        &self,
        s: &Shape,
        entry: &'static str,
        params: &WinogradParams,
        src: &WgpuStorage,
        out: &WgpuStorage,
    ) -> Result<()> {
        let groups = self.groups_for(params.n as usize, OP)?;
        self.run(s.shader(), entry, &SIGNATURE, params, &[bind(src), self.unused(), bind(out)], groups)
    }
}

#[cfg(test)]
mod tests {
    use super::{extents, weight_grad_plan, ConvPass, Shape, WinogradTile};
    use crate::backend::{Conv2dArgs, ConvGeom};

    #[test]
    fn the_weight_gradient_plans_tiles_that_waste_little_in_aligned_slices() {
        use super::super::matmul::MatmulKernel::{PerOutput, Square, Tall, Tile64, Wide};
        let plan = |m, n, tiles, large| {
            let p = weight_grad_plan(16, m, n, tiles, large);
            (p.kernel, p.slices, p.slice_len)
        };
        // ResNet-18 at batch 128: 64 channels at 32² (32768 tiles) down to 512 at 4² (512).
        // 64 channels would leave 3/4 of a 128×128 tile idle: 64×64 tiles, about 1024 of them.
        // 128 channels take the 128×128 tile: 16 slices of 16 fill one wave of two per SM.
        assert_eq!(plan(64, 64, 32768, true), (Tile64, 64, 512));
        assert_eq!(plan(128, 128, 8192, true), (Square, 16, 512));
        assert_eq!(plan(128, 128, 8192, false), (Square, 16, 512));
        // 256: 32 wide tiles per slice, 4 slices fill one wave of 132; 512: 128 tiles unsplit.
        assert_eq!(plan(256, 256, 2048, true), (Wide, 4, 512));
        assert_eq!(plan(512, 512, 512, true), (Wide, 1, 512));
        // 256 × 128 fits the tall tile: 8 slices of 16 workgroups.
        assert_eq!(plan(256, 128, 2048, true), (Tall, 8, 256));
        assert_eq!(plan(128, 256, 2048, true).0, Wide);
        // Without the large tiles' resources, the 128×128 tile: 64 workgroups per slice.
        assert_eq!(plan(256, 256, 2048, false), (Square, 4, 512));
        // 64 × 192: a 128-row tile would be half padding, 64×64 tiles none.
        assert_eq!(plan(64, 192, 4096, true).0, Tile64);
        // 72 × 72 pads 64×64 tiles as much as a 128×128 one, which runs faster.
        assert_eq!(plan(72, 72, 4096, true).0, Square);
        // A short side: one invocation per output; few tiles: one slice, padded to 4.
        assert_eq!(plan(8, 16, 7, true), (PerOutput, 1, 8));
        assert_eq!(plan(8, 8, 1000, true), (PerOutput, 3, 336));
        for (m, n, tiles) in [(8, 8, 1000), (64, 8, 12345), (72, 72, 257), (256, 256, 3000), (136, 512, 999)] {
            for large in [false, true] {
                let p = weight_grad_plan(16, m, n, tiles, large);
                assert!(
                    p.slice_len.is_multiple_of(4)
                        && p.cols() >= tiles
                        && (p.slices - 1) * p.slice_len < tiles
                        && (p.slices == 1 || p.slice_len >= super::MIN_SLICE),
                    "{m} {n} {tiles} {large}: {p:?}"
                );
            }
        }
    }

    #[test]
    fn the_forward_products_leave_large_tiles_that_64_channels_half_fill() {
        use super::super::matmul::MatmulKernel::{PerOutput, Square, Tall, Tile64, Wide};
        use super::{forward_products_plan, MatmulPlan};
        let plan = |kernel, slices| MatmulPlan { kernel, slices };
        assert_eq!(forward_products_plan(plan(Wide, 1), 64), plan(Tile64, 1));
        assert_eq!(forward_products_plan(plan(Tall, 1), 64), plan(Tile64, 1));
        assert_eq!(forward_products_plan(plan(Square, 1), 64), plan(Tile64, 1));
        // Full 128-row tiles, or 192 rows (3/4 of two tiles, 41·3/4 above 28): the dispatcher's.
        for (kernel, o) in [(Wide, 128), (Wide, 512), (Square, 256), (Wide, 192), (Tall, 256)] {
            assert_eq!(forward_products_plan(plan(kernel, 1), o), plan(kernel, 1), "{kernel:?} {o}");
        }
        assert_eq!(forward_products_plan(plan(Tile64, 1), 64), plan(Tile64, 1));
        assert_eq!(forward_products_plan(plan(PerOutput, 1), 8), plan(PerOutput, 1));
        // A split product keeps its plan.
        assert_eq!(forward_products_plan(plan(Wide, 4), 64), plan(Wide, 4));
    }

    #[test]
    fn the_input_gradient_is_a_convolution_back_to_the_input() {
        for pad in 0..=2 {
            let g = ConvGeom::square(2, 3, (5, 6), 3, 1, pad, 1).unwrap();
            let a = Conv2dArgs { geom: g, out_channels: 4, groups: 1 };
            let b = Shape::input_grad(&a, WinogradTile::F2x2);
            assert_eq!((b.channels, b.out_channels), (4, 3));
            assert_eq!(ConvGeom::out_extent(b.in_h, 3, 1, b.pad_h, 1), Some(g.in_h));
            assert_eq!(ConvGeom::out_extent(b.in_w, 3, 1, b.pad_w, 1), Some(g.in_w));
            assert_eq!((b.out_h, b.out_w), (5, 6));
        }
        let g = ConvGeom::square(128, 64, (32, 32), 3, 1, 1, 1).unwrap();
        let big = extents(&Conv2dArgs { geom: g, out_channels: 64, groups: 1 }, WinogradTile::F2x2);
        assert_eq!(big[2], ("forward input tiles", 16 * 64 * 32768));
        // F(4×4, 3×3): 8×8 tiles of 4×4 per image, 36 positions each.
        let big = extents(&Conv2dArgs { geom: g, out_channels: 64, groups: 1 }, WinogradTile::F4x4);
        assert_eq!(big[2], ("forward input tiles", 36 * 64 * 8192));
        let s = Shape::forward(
            &Conv2dArgs { geom: ConvGeom::square(3, 2, (7, 9), 3, 1, 1, 1).unwrap(), out_channels: 2, groups: 1 },
            WinogradTile::F4x4,
        );
        assert_eq!((s.tiles_h(), s.tiles_w(), s.tiles(), s.xi()), (2, 3, 18, 36));
    }

    /// Tiles past the 32-bit indexing (and, on most adapters, the input past the largest
    /// buffer): forced Winograd refuses the convolution with an error naming the op and the
    /// buffer (before allocating anything), `Auto` leaves it to the GEMM.
    #[test]
    fn a_convolution_too_large_for_the_tiles_is_refused_when_forced() {
        use super::super::{ConvAlgorithm, WgpuBackend};
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let g = ConvGeom::square(4, 512, (512, 512), 3, 1, 1, 1).unwrap();
        let a = Conv2dArgs { geom: g, out_channels: 512, groups: 1 };
        let small =
            Conv2dArgs { geom: ConvGeom::square(1, 3, (4, 4), 3, 1, 1, 1).unwrap(), out_channels: 2, groups: 1 };
        for (algorithm, tile) in
            [(ConvAlgorithm::Winograd, WinogradTile::F2x2), (ConvAlgorithm::Winograd4x4, WinogradTile::F4x4)]
        {
            let forced = WgpuBackend::with_conv_algorithm(algorithm).unwrap();
            for pass in [ConvPass::Forward, ConvPass::InputGrad, ConvPass::WeightGrad] {
                let err = forced.conv_winograd(&a, pass).unwrap_err();
                assert!(
                    matches!(&err, crate::Error::Gpu(m) if m.contains("conv2d (winograd)") && m.contains("elements")),
                    "{algorithm:?} {pass:?}: {err}"
                );
            }
            assert_eq!(forced.conv_winograd(&small, ConvPass::WeightGrad).unwrap(), Some(tile));
        }
        let auto = WgpuBackend::with_conv_algorithm(ConvAlgorithm::Auto).unwrap();
        for pass in [ConvPass::Forward, ConvPass::InputGrad, ConvPass::WeightGrad] {
            assert_eq!(auto.conv_winograd(&a, pass).unwrap(), None);
        }
    }
}
