//! Fused convolution: dispatch of the implicit GEMMs in `conv2d.wgsl` (forward, weight gradient,
//! input gradient), each on 64-row tiles or, for the forward and input gradient where the
//! adapter's workgroup memory allows and the GEMM fills them, on 128×128 tiles (`choose_tiles`).
//! Every geometry `Conv2dArgs` describes runs here; the bias gradient and the sum of the weight
//! gradient's split partials use the backend's reduction. Where the backend's `ConvAlgorithm`
//! takes Winograd, the forward and the input and weight gradients go to `winograd.rs` instead
//! (the bias gradient stays here). Until the start-up warm-up has compiled these kernels, small
//! convolutions run the stand-ins of `conv2d_direct.rs`. On tensor cores the GEMMs of one group
//! run in `conv2d_coop.rs`.

use super::conv_algorithm::ConvPass;
use super::launch::{bind, check_len};
use super::pipelines::{self, Access};
use super::stride_phase::{axis_phases, AxisPhase};
use super::window::WindowParams;
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{Conv2dArgs, Conv2dGrads, Conv2dWanted, DType, ReduceDims, ReduceOp, Storage};
use crate::{Error, Result};

const OP: &str = "conv2d";
/// Output tile sides and K slice of the kernels (`TILE`, `WIDE` and `BK` in the shader): the
/// weight gradient's tiles are TILE × TILE, the forward's and input gradient's TILE × WIDE.
const TILE: usize = 64;
const WIDE: usize = 128;
const SLICE: usize = 16;
/// The weight gradient has few output tiles (o/g × c/g·kh·kw) and a long reduction (n·oh·ow), so
/// the reduction is split until about this many workgroups share it (the H200's 132 SMs hold
/// about 8 of these workgroups each)...
const SPLIT_TARGET_GROUPS: usize = 1024;
/// ...in pieces no shorter than this, so the partial sums stay small next to the products.
const MIN_SPLIT_LEN: usize = 512;
/// The side of the `_large` kernels' square tiles (`LARGE` in the shader; 8×8 outputs per
/// invocation of a 16×16 workgroup), for the forward and input gradient. A GEMM takes them when
/// its M side (output channels for the forward, input channels for the input gradient, per
/// group) fills at least one such tile...
const LARGE: usize = 128;
/// ...and, as these GEMMs are not split, when it has at least this many tiles: about one per SM
/// of an H100 (132). Two of these workgroups fit an SM, but each does the work of two 64×128
/// ones with fewer workgroup-memory reads per product, so a GEMM with about one large tile per
/// SM finishes no later than on the 64×128 tiles. (ResNet-18's stride-1 convolutions at batch
/// 128: 128 channels at 16×16 have 256 tiles, 256 at 8×8 have 128, 512 at 4×4 only 64 and keep
/// the 64×128 tiles.)
const MIN_LARGE_TILES: usize = 128;
/// Workgroup memory of the `_large` kernels: two slices of [16][128] values with rows padded by a
/// vec4 (528 vec4 each) and the double-buffered K table (32 vec4<i32>); the input gradient's
/// also holds [`WEIGHT_TABLE_BYTES`]. More than WebGPU's default 16 KiB: adapters with less take
/// the 64-row tiles. (On an H100, runs T and U of docs/BENCHMARKS.md, 128×128 tiles for the weight
/// gradient and 64×256 ones for GEMMs of at most 64 rows were slower than the 64-row tiles, so
/// they were removed.)
const LARGE_SHARED_BYTES: u32 = 2 * 528 * 16 + 32 * 16;
/// Stride phases along each axis that one input-gradient dispatch holds (`phase_axes` in
/// `lib/window.wgsl` has room for two per axis).
const PHASES_PER_AXIS: usize = 2;
/// The input gradient's table of weight offsets (32 u32).
const WEIGHT_TABLE_BYTES: u32 = 32 * 4;
/// The kernels mix u32 and i32 index arithmetic: each quantity checked against this bound, and
/// any sum of two of them, stays below 2^31.
pub(super) const INDEX_LIMIT: u64 = 1 << 30;
/// Bindings of every entry point: x, weight, grad, bias, out (unused ones get a dummy buffer).
pub(super) const SIGNATURE: [Access; 5] = [Access::Read, Access::Read, Access::Read, Access::Read, Access::Write];

/// Element counts of one convolution's tensors and the extents of its three GEMMs.
pub(super) struct Dims {
    pub input: usize,
    pub weight: usize,
    pub output: usize,
    /// Input and output channels per group.
    pub group_in: usize,
    pub group_out: usize,
    /// Weight columns per output channel: c/g·kh·kw.
    pub weight_cols: usize,
    /// The spatial extents the GEMMs run over: n·oh·ow and n·h·w.
    pub out_pixels: usize,
    /// Input pixels of the input gradient's largest stride phase (all of them at stride 1).
    pub phase_pixels: usize,
}

impl Dims {
    pub(super) fn of(a: &Conv2dArgs) -> Dims {
        let g = &a.geom;
        let group_in = g.channels / a.groups;
        let weight_cols = group_in * g.kernel_h * g.kernel_w;
        let out_pixels = g.batch * g.out_h * g.out_w;
        Dims {
            input: g.batch * g.in_h * g.in_w * g.channels,
            weight: a.out_channels * weight_cols,
            output: out_pixels * a.out_channels,
            group_in,
            group_out: a.out_channels / a.groups,
            weight_cols,
            out_pixels,
            phase_pixels: g.batch * g.in_h.div_ceil(g.stride_h.max(1)) * g.in_w.div_ceil(g.stride_w.max(1)),
        }
    }
}

/// Refuses a convolution whose indices could leave the kernels' 32-bit range. Vulkan binds at
/// most 4 GiB, fewer than 2^30 elements, so only absurd paddings or strides get here.
fn check_index_range(a: &Conv2dArgs) -> Result<()> {
    let g = &a.geom;
    let v = |x: usize| x as u64;
    let padded_plane = (v(g.in_h) + 2 * v(g.pad_h)).saturating_mul(v(g.in_w) + 2 * v(g.pad_w));
    let quantities = [
        ("padded input", v(g.batch).saturating_mul(v(g.channels)).saturating_mul(padded_plane)),
        ("output", v(g.batch * a.out_channels * g.out_h * g.out_w).saturating_add(padded_plane)),
        ("weight", v(a.out_channels * g.channels / a.groups * g.kernel_h * g.kernel_w)),
        ("stride", v(g.stride_h).saturating_mul(v(g.stride_w))),
    ];
    match quantities.iter().find(|(_, q)| *q > INDEX_LIMIT) {
        Some((what, q)) => Err(Error::Gpu(format!(
            "{OP}: the {what} extent {q} exceeds the 32-bit indexing of the wgpu convolution kernels \
             (at most {INDEX_LIMIT}); use the CPU device"
        ))),
        None => Ok(()),
    }
}

/// Which tiles the three GEMMs of a convolution run on: a backend's setting ([`Conv2dTiles::Auto`]
/// unless a test or the kernel lab asks otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv2dTiles {
    /// The 128×128 tiles for forwards and input gradients whose M side and tile count fill them
    /// (see `MIN_LARGE_TILES` in `conv2d.rs`), else the 64-row tiles. Weight gradients always
    /// run on the 64×64 tiles.
    Auto,
    /// Always the 64-row tiles (64×128 for the forward and input gradient, 64×64 for the weight
    /// gradient).
    Small,
    /// The 128×128 tiles for every forward and input gradient whose M side is over 64, wherever
    /// the adapter's workgroup memory allows them, whatever the tile count: for tests of their
    /// edges at small sizes. M sides of at most 64 and weight gradients keep the 64-row tiles.
    Large,
}

/// The tiles of a forward or input gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tile {
    /// 64×128.
    Small,
    /// 128×128 (`_large`).
    Large,
}

/// The tiles of the forward and input gradient (the weight gradient always runs on 64×64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tiles {
    forward: Tile,
    input_grad: Tile,
}

/// The dispatcher's choice of tiles for each GEMM of `a` on an adapter with `limits`.
fn choose_tiles(limits: &::wgpu::Limits, setting: Conv2dTiles, a: &Conv2dArgs, d: &Dims) -> Tiles {
    let memory = limits.max_compute_workgroup_storage_size;
    let auto = setting == Conv2dTiles::Auto;
    let forced = setting == Conv2dTiles::Large;
    // A forward or input gradient of M rows over `pixels` columns per group, whose tables take
    // `table` bytes beyond the K table.
    let gemm = |m: usize, pixels: usize, table: u32| {
        if m <= TILE || memory < LARGE_SHARED_BYTES + table {
            return Tile::Small;
        }
        let fills = m >= LARGE && m.div_ceil(LARGE) * pixels.div_ceil(LARGE) * a.groups >= MIN_LARGE_TILES;
        if forced || auto && fills {
            Tile::Large
        } else {
            Tile::Small
        }
    };
    Tiles {
        forward: gemm(d.group_out, d.out_pixels, 0),
        input_grad: gemm(d.group_in, d.phase_pixels, WEIGHT_TABLE_BYTES),
    }
}

impl Tile {
    fn forward(self) -> &'static str {
        match self {
            Tile::Small => "conv2d_forward",
            Tile::Large => "conv2d_forward_large",
        }
    }

    fn input_grad(self) -> &'static str {
        match self {
            Tile::Small => "conv2d_input_grad",
            Tile::Large => "conv2d_input_grad_large",
        }
    }

    /// The forward's and input gradient's tile, rows by columns.
    fn sides(self) -> [usize; 2] {
        match self {
            Tile::Small => [TILE, WIDE],
            Tile::Large => [LARGE, LARGE],
        }
    }
}

/// The entry points of `conv2d.wgsl` that run the forward, input gradient and weight gradient.
fn entries(t: Tiles) -> [&'static str; 3] {
    [t.forward.forward(), t.input_grad.input_grad(), "conv2d_weight_grad"]
}

/// The `(shader file, entry point)` of the forward, input gradient and weight gradient of `a`
/// on an adapter with `limits` (the dispatcher's own choice, once the kernels are compiled). For
/// the test that every kernel fits WebGPU's default limits or is gated on the adapter's
/// (`tests/house/shaders_validate.rs`).
pub(super) fn conv2d_kernels_under(limits: &::wgpu::Limits, a: &Conv2dArgs) -> [(&'static str, &'static str); 3] {
    entries(choose_tiles(limits, Conv2dTiles::Auto, a, &Dims::of(a))).map(|entry| (pipelines::CONV2D.name, entry))
}

/// The window parameters (`lib/window.wgsl`; `n` invocations) with the convolution's own.
pub(super) fn params(a: &Conv2dArgs, n: usize, has_bias: bool, split_len: usize) -> WindowParams {
    WindowParams {
        out_channels: a.out_channels as u32,
        groups: a.groups as u32,
        has_bias: has_bias as u32,
        split_len: split_len as u32,
        ..WindowParams::of(&a.geom, n, false)
    }
}

impl WgpuBackend {
    pub(super) fn conv2d_fused(
        &self,
        x: &Storage,
        weight: &Storage,
        bias: Option<&Storage>,
        a: &Conv2dArgs,
    ) -> Result<Storage> {
        let d = Dims::of(a);
        let (x, w) = (self.gpu(x, DType::F32, OP)?, self.gpu(weight, DType::F32, OP)?);
        check_len(OP, x, d.input)?;
        check_len(OP, w, d.weight)?;
        let bias = bias.map(|b| self.gpu(b, DType::F32, OP)).transpose()?;
        if let Some(b) = bias {
            check_len(OP, b, a.out_channels)?;
        }
        check_index_range(a)?;
        if let Some(tile) = self.conv_winograd(a, ConvPass::Forward)? {
            return self.winograd_forward(x, w, bias, a, tile);
        }
        if self.conv_on_tensor_cores(a, &d) {
            return self.conv2d_coop_forward(x, w, bias, a, &d);
        }
        if self.conv2d_stand_in("conv2d_forward", &d) {
            return self.conv2d_direct_forward(x, w, bias, a, &d);
        }
        let out = self.alloc(d.output, DType::F32, OP)?;
        let tile = self.conv2d_tile(self.conv2d_tiles_of(a, &d).forward, Tile::forward);
        let (entry, [rows, cols]) = (tile.forward(), tile.sides());
        // M tiles (output channels) × N tiles (n·oh·ow) × groups, walked with a grid stride.
        let tiles = d.group_out.div_ceil(rows) * d.out_pixels.div_ceil(cols) * a.groups;
        let buffers = [bind(x), bind(w), self.unused(), bias.map_or(self.unused(), bind), bind(&out)];
        let params = params(a, 0, bias.is_some(), 0);
        self.run(&pipelines::CONV2D, entry, &SIGNATURE, &params, &buffers, self.groups_rows(tiles))?;
        Ok(self.output(out))
    }

    pub(super) fn conv2d_fused_backward(
        &self,
        x: &Storage,
        weight: &Storage,
        grad: &Storage,
        a: &Conv2dArgs,
        wanted: Conv2dWanted,
    ) -> Result<Conv2dGrads<Storage>> {
        let d = Dims::of(a);
        let (xs, w, g) =
            (self.gpu(x, DType::F32, OP)?, self.gpu(weight, DType::F32, OP)?, self.gpu(grad, DType::F32, OP)?);
        check_len(OP, xs, d.input)?;
        check_len(OP, w, d.weight)?;
        check_len(OP, g, d.output)?;
        check_index_range(a)?;
        let tensor_cores = self.conv_on_tensor_cores(a, &d);
        let input_grad = || match self.conv_winograd(a, ConvPass::InputGrad)? {
            Some(tile) => self.winograd_input_grad(w, g, a, tile),
            None => self.conv2d_input_grad(w, g, a, &d),
        };
        let weight_grad = || match self.conv_winograd(a, ConvPass::WeightGrad)? {
            Some(tile) => self.winograd_weight_grad(xs, g, a, tile),
            None if tensor_cores => self.conv2d_coop_weight_grad(xs, g, a, &d),
            None => self.conv2d_weight_grad(xs, g, a, &d),
        };
        Ok(Conv2dGrads {
            x: wanted.x.then(input_grad).transpose()?,
            weight: wanted.weight.then(weight_grad).transpose()?,
            bias: wanted.bias.then(|| self.conv2d_bias_grad(grad, a)).transpose()?,
        })
    }

    /// The stride phases (`stride_phase.rs`) up to 2×2 per dispatch, one per workgroup z: at
    /// stride 2 every phase runs in one dispatch, whose workgroups fill the GPU where one
    /// phase's alone would not. Each phase writes its own pixels of the gradient. Pixels of
    /// phases without taps (3 in 4 of a 1×1 convolution's at stride 2) get no gradient: where
    /// there are any, the output is cleared first and those phases do not run.
    fn conv2d_input_grad(&self, w: &WgpuStorage, grad: &WgpuStorage, a: &Conv2dArgs, d: &Dims) -> Result<Storage> {
        if self.conv2d_stand_in("conv2d_input_grad", d) {
            return self.conv2d_direct_input_grad(w, grad, a, d);
        }
        let g = &a.geom;
        let live = |phases: Vec<AxisPhase>| -> (Vec<AxisPhase>, bool) {
            let all = phases.len();
            let live: Vec<AxisPhase> = phases.into_iter().filter(|p| p.taps > 0).collect();
            let some_dead = live.len() < all;
            (live, some_dead)
        };
        let (rows_phases, dead_rows) = live(axis_phases(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h));
        let (cols_phases, dead_cols) = live(axis_phases(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w));
        let out = if dead_rows || dead_cols {
            self.zeroed(d.input, DType::F32, OP)?
        } else {
            self.alloc(d.input, DType::F32, OP)?
        };
        let tile = self.conv2d_tile(self.conv2d_tiles_of(a, d).input_grad, Tile::input_grad);
        let (entry, [rows, cols]) = (tile.input_grad(), tile.sides());
        let buffers = [self.unused(), bind(w), bind(grad), self.unused(), bind(&out)];
        let axis = |ph: &AxisPhase| [ph.first, ph.rows, ph.tap, ph.taps].map(|v| v as u32);
        for rows_chunk in rows_phases.chunks(PHASES_PER_AXIS) {
            for cols_chunk in cols_phases.chunks(PHASES_PER_AXIS) {
                let mut phase_axes = [[0; 4]; 4];
                for (i, ph) in rows_chunk.iter().enumerate() {
                    phase_axes[i] = axis(ph);
                }
                for (i, pw) in cols_chunk.iter().enumerate() {
                    phase_axes[PHASES_PER_AXIS + i] = axis(pw);
                }
                let params = WindowParams {
                    tap_step_h: rows_chunk[0].tap_step as u32,
                    tap_step_w: cols_chunk[0].tap_step as u32,
                    phases_w: cols_chunk.len() as u32,
                    phase_axes,
                    ..params(a, 0, false, 0)
                };
                // M tiles (input channels) × N tiles (n · a phase's pixels) × groups, for the
                // phase with the most pixels; workgroups of the others' z with no tile return.
                let pixels = rows_chunk.iter().map(|p| p.rows).max().unwrap_or(0)
                    * cols_chunk.iter().map(|p| p.rows).max().unwrap_or(0);
                let tiles = d.group_in.div_ceil(rows) * (g.batch * pixels).div_ceil(cols) * a.groups;
                let [x, y, _] = self.groups_rows(tiles);
                let groups = [x, y, (rows_chunk.len() * cols_chunk.len()) as u32];
                self.run(&pipelines::CONV2D, entry, &SIGNATURE, &params, &buffers, groups)?;
            }
        }
        Ok(self.output(out))
    }

    fn conv2d_weight_grad(&self, x: &WgpuStorage, grad: &WgpuStorage, a: &Conv2dArgs, d: &Dims) -> Result<Storage> {
        let reduction = d.out_pixels;
        if reduction == 0 {
            return Ok(self.output(self.zeroed(d.weight, DType::F32, OP)?));
        }
        if self.conv2d_stand_in("conv2d_weight_grad", d) {
            return self.conv2d_direct_weight_grad(x, grad, a, d);
        }
        // M tiles (output channels) × N tiles (c/g·kh·kw) × groups, then splits of n·oh·ow whose
        // partial sums [split, o, c/g·kh·kw] are added up by a reduction.
        let tiles = d.group_out.div_ceil(TILE) * d.weight_cols.div_ceil(TILE) * a.groups;
        // The partials stay inside the index range, like every other buffer.
        let most = (INDEX_LIMIT as usize / d.weight.max(1)).max(1);
        let wanted = SPLIT_TARGET_GROUPS.div_ceil(tiles.max(1)).clamp(1, reduction.div_ceil(MIN_SPLIT_LEN).min(most));
        let split_len = reduction.div_ceil(wanted).next_multiple_of(SLICE);
        let splits = reduction.div_ceil(split_len);
        let partials = self.alloc(splits * d.weight, DType::F32, OP)?;
        let buffers = [bind(x), self.unused(), bind(grad), self.unused(), bind(&partials)];
        let params = params(a, 0, false, split_len);
        let groups = self.groups_rows(tiles * splits);
        self.run(&pipelines::CONV2D, "conv2d_weight_grad", &SIGNATURE, &params, &buffers, groups)?;
        let partials = self.output(partials);
        if splits == 1 {
            return Ok(partials);
        }
        self.reduce_kernel(ReduceOp::Sum, &partials, ReduceDims { outer: 1, len: splits, inner: d.weight })
    }

    /// The entry points of `conv2d.wgsl` that this backend runs for the forward, input gradient
    /// and weight gradient of `a` once its kernels are compiled (for tests that must reach a
    /// kind of tile).
    #[doc(hidden)]
    pub fn conv2d_entries(&self, a: &Conv2dArgs) -> [&'static str; 3] {
        entries(self.conv2d_tiles_of(a, &Dims::of(a)))
    }

    /// The tiles this backend's setting chooses for the GEMMs of `a`.
    fn conv2d_tiles_of(&self, a: &Conv2dArgs, d: &Dims) -> Tiles {
        choose_tiles(&self.ctx.limits, self.conv2d_tiles, a, d)
    }

    /// The tiles a GEMM chosen for `chosen` (whose entry point `entry` names) runs on now: the
    /// 64-row tiles, which compute the same values, while the start-up warm-up is compiling
    /// kernels and the chosen ones are not ready (see `Pipelines::stand_in`).
    fn conv2d_tile(&self, chosen: Tile, entry: fn(Tile) -> &'static str) -> Tile {
        if chosen != Tile::Small && self.pipelines.stand_in(&pipelines::CONV2D, entry(chosen)) {
            return Tile::Small;
        }
        chosen
    }

    /// Σ of the output gradient over oh·ow (rows of [n·o, oh·ow]), then over the batch.
    fn conv2d_bias_grad(&self, grad: &Storage, a: &Conv2dArgs) -> Result<Storage> {
        let g = &a.geom;
        let dims = ReduceDims { outer: g.batch * a.out_channels, len: g.out_h * g.out_w, inner: 1 };
        let per_sample = self.reduce_kernel(ReduceOp::Sum, grad, dims)?;
        if g.batch == 1 {
            return Ok(per_sample);
        }
        self.reduce_kernel(ReduceOp::Sum, &per_sample, ReduceDims { outer: 1, len: g.batch, inner: a.out_channels })
    }
}
