//! Matmul dispatch: which of the kernels in `matmul.wgsl` / `matmul_vec4.wgsl` /
//! `matmul_coop.wgsl` a product takes, and the device's matmul precision.

use std::sync::atomic::Ordering;

use super::coop_tiles;
use super::launch::bind;
use super::params::kernel_params;
use super::pipelines::{self, Access, KernelState};
use super::{WgpuBackend, STAND_IN_MAX_MACS};
use crate::backend::{DType, MatmulArgs, MatrixLayout, ReduceDims, ReduceOp, Storage};
use crate::{Error, MatmulPrecision, Result};

/// Buffer bindings of every matmul kernel: lhs, rhs, out.
const SIGNATURE: [Access; 3] = [Access::Read, Access::Read, Access::Write];

/// Below this many 128×128 tiles the 64×64 kernel keeps more of a big GPU busy; from 2048³
/// (256 tiles of 128×128) the large tile wins (`tools/src/bin/matmul_lab.rs`; figures in
/// BENCHMARKS.md).
const MIN_LARGE_TILES: usize = 256;

/// Split-K: a product with fewer 64×64 output tiles than this, and a long `k`, is computed as
/// `slices` products over consecutive slices of `k` (a batch of partial outputs, which fills the
/// GPU) summed by the column reduction. The weight gradients of a transformer's linear layers
/// (`[1152, 16384] @ [16384, 384]`: 108 tiles) are such products.
const SPLIT_K_MIN_TILES: usize = 512;
/// The shortest `k` slice worth a partial output of its own.
const SPLIT_K_MIN_SLICE: usize = 256;
const SPLIT_K_MAX_SLICES: usize = 64;

/// How many `k` slices a product is split into (1: none): the fewest (a power of two) that reach
/// [`SPLIT_K_MIN_TILES`] workgroups, each slice at least [`SPLIT_K_MIN_SLICE`] long, dividing `k`.
fn split_k_slices(args: &MatmulArgs) -> usize {
    let tiles = args.m.div_ceil(64) * args.n.div_ceil(64) * args.batch;
    if args.batch != 1 || tiles >= SPLIT_K_MIN_TILES {
        return 1;
    }
    let mut slices = 1;
    while tiles * slices < SPLIT_K_MIN_TILES && slices * 2 <= SPLIT_K_MAX_SLICES && splits_aligned(args.k, slices * 2) {
        slices *= 2;
    }
    slices
}

/// Whether `k` splits into `slices` slices of at least [`SPLIT_K_MIN_SLICE`] whose length is a
/// multiple of 4: each slice then starts where a vec4 load of an aligned operand stays aligned
/// (a slice of 525 columns would start mid-vec4 and the vec4 kernels would read wrong values).
fn splits_aligned(k: usize, slices: usize) -> bool {
    k.is_multiple_of(slices * 4) && k / slices >= SPLIT_K_MIN_SLICE
}

/// The products over `slices` consecutive slices of `k` as one batch: slice `s` starts `s·k/slices`
/// columns into `lhs` and as many rows into `rhs`.
fn split_k_args(args: &MatmulArgs, slices: usize) -> MatmulArgs {
    let k = args.k / slices;
    let (mut lhs, mut rhs) = (args.lhs, args.rhs);
    lhs.batch_stride = k * lhs.col_stride;
    rhs.batch_stride = k * rhs.row_stride;
    MatmulArgs { batch: slices, m: args.m, k, n: args.n, lhs, rhs }
}

/// The tile of `matmul_large` in `matmul_vec4.wgsl`, rows by columns (the strided kernel's is
/// 128×128), on 32×16 invocations.
pub(super) const VEC4_LARGE_TILE: [usize; 2] = [128, 256];
/// The tile of `matmul_tall` (vec4 only), on 16×32 invocations.
pub(super) const VEC4_TALL_TILE: [usize; 2] = [256, 128];
/// The tile of `matmul_square` (vec4 only), on 16×16 invocations; the dispatcher never picks it,
/// the Winograd weight gradient does (`winograd.rs`).
pub(super) const VEC4_SQUARE_TILE: [usize; 2] = [128, 128];
const VEC4_LARGE_INVOCATIONS: u32 = 512;

/// The streaming multiprocessors that a split product's tiles are counted against: an H100's
/// (and an H200's) 132. The vec4 large tiles run one workgroup per SM (512 invocations at up to
/// 128 registers), so a product whose workgroups spill a few past a multiple of this waits a
/// whole extra wave for them.
pub(super) const WAVE_SMS: usize = 132;

/// How many partial outputs written and summed again cost as much time as one k step of a wave
/// of large tiles (each SM's 128×256 FMAs, about 0.2 µs on an H100; 8 bytes per partial output
/// at about 2.5 TB/s).
pub(super) const PARTIAL_OUTPUTS_PER_K_STEP: usize = 65536;

/// The kernel a product runs on (see [`MatmulPlan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulKernel {
    /// One invocation per output (`matmul_small`), for products with a side under 16.
    PerOutput,
    /// 64×64 tiles (`matmul`).
    Tile64,
    /// The large tile (`matmul_large`): 128×256 with vec4 loads, 128×128 strided.
    Wide,
    /// 256×128 tiles (`matmul_tall`), vec4 loads only.
    Tall,
    /// 128×128 tiles on 256 invocations (`matmul_square`), vec4 loads only: for batches of
    /// products whose sides are 128, which a 128×256 tile would half waste.
    Square,
}

impl MatmulKernel {
    fn entry(self) -> &'static str {
        match self {
            MatmulKernel::PerOutput => "matmul_small",
            MatmulKernel::Tile64 => "matmul",
            MatmulKernel::Wide => "matmul_large",
            MatmulKernel::Tall => "matmul_tall",
            MatmulKernel::Square => "matmul_square",
        }
    }
}

/// How the wgpu backend computes a product: the kernel, and into how many consecutive slices of
/// `k` it is split (a batch of partial products summed by the column reduction; 1: none).
/// `WgpuBackend::matmul_plan` gives the dispatcher's choice; `WgpuBackend::matmul_with_plan`
/// runs any valid plan, for the kernel lab and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulPlan {
    /// The kernel that computes the tiles (of each slice's partial product).
    pub kernel: MatmulKernel,
    /// Consecutive slices of `k` computed as a batch and summed (1: the product unsplit).
    pub slices: usize,
}

/// What an adapter and a product's layouts allow: vec4 loads, and the vec4 large tiles' shared
/// memory and invocations.
#[derive(Clone, Copy, Debug)]
struct Fit {
    vec4: bool,
    large: bool,
}

/// The dispatcher's plan: one invocation per output for a short side. Products with at least
/// [`MIN_LARGE_TILES`] tiles of 128×128, and split-K products ([`split_k_slices`]) with at
/// least [`SPLIT_LARGE_MIN_OUTPUTS`] outputs, take the large tiles: with vec4 operands where the
/// adapter fits them, the tile and slice count of [`fewest_waves`], else the strided 128×128
/// tile unsplit. The rest run on 64×64 tiles, split as [`split_k_slices`] says.
fn choose_plan(args: &MatmulArgs, fit: Fit) -> MatmulPlan {
    let plan = |kernel, slices| MatmulPlan { kernel, slices };
    if args.m < 16 || args.n < 16 {
        return plan(MatmulKernel::PerOutput, 1);
    }
    let slices = split_k_slices(args);
    let vec4_large = fit.vec4 && fit.large;
    if slices > 1 {
        let large = vec4_large && args.m * args.n >= SPLIT_LARGE_MIN_OUTPUTS;
        return if large { fewest_waves(args) } else { plan(MatmulKernel::Tile64, slices) };
    }
    if args.m.div_ceil(128) * args.n.div_ceil(128) * args.batch < MIN_LARGE_TILES {
        return plan(MatmulKernel::Tile64, 1);
    }
    if vec4_large {
        fewest_waves(args)
    } else {
        plan(MatmulKernel::Wide, 1)
    }
}

/// A split-K product with fewer outputs than this (8 tiles of 128×256) stays on 64×64 tiles: the
/// large ones would need 32-64 slices of 256 to fill the GPU, which the eleventh lab round found
/// slower for the smaller weight gradients of the GPT and faster for the larger ones
/// (BENCHMARKS.md).
const SPLIT_LARGE_MIN_OUTPUTS: usize = 1 << 18;

/// The shader, entry point and tile `[rows, columns]` that compute `kernel`'s tiles at f32. The
/// large vec4 tiles need their shared memory and invocations (`fit.large`); without them the
/// strided kernel's 128×128 tile serves, which fits WebGPU's default limits.
fn tiles_kernel(kernel: MatmulKernel, fit: Fit) -> (&'static pipelines::Shader, &'static str, [usize; 2]) {
    let large = matches!(kernel, MatmulKernel::Wide | MatmulKernel::Tall);
    let vec4 = fit.vec4 && (!large || fit.large);
    let shader = if vec4 { &pipelines::MATMUL_VEC4 } else { &pipelines::MATMUL };
    let tile = match kernel {
        MatmulKernel::Wide if vec4 => VEC4_LARGE_TILE,
        MatmulKernel::Wide => [128, 128],
        MatmulKernel::Tall => VEC4_TALL_TILE,
        MatmulKernel::Square => VEC4_SQUARE_TILE,
        MatmulKernel::Tile64 | MatmulKernel::PerOutput => [64, 64],
    };
    (shader, kernel.entry(), tile)
}

/// What an adapter with `limits` allows a product of `args`: vec4 loads (the layouts) and the
/// vec4 large tiles (the adapter's workgroup memory and invocations).
fn fit_under(limits: &::wgpu::Limits, args: &MatmulArgs) -> Fit {
    Fit {
        vec4: args.n.is_multiple_of(4)
            && vec4_readable(&args.lhs, args.m, args.k, args.batch)
            && vec4_readable(&args.rhs, args.k, args.n, args.batch),
        large: limits.max_compute_workgroup_storage_size >= VEC4_LARGE_SHARED_BYTES
            && limits.max_compute_invocations_per_workgroup >= VEC4_LARGE_INVOCATIONS,
    }
}

/// The `(shader file, entry point)` an f32 product of `args` runs on an adapter with `limits`:
/// the dispatcher's own choice ([`choose_plan`], then [`tiles_kernel`]). For the test that every
/// kernel fits WebGPU's default limits or is gated on the adapter's (`tests/house/shaders_validate.rs`).
pub(super) fn matmul_kernel_under(limits: &::wgpu::Limits, args: &MatmulArgs) -> (&'static str, &'static str) {
    let plan = choose_plan(args, fit_under(limits, args));
    let run = if plan.slices == 1 { *args } else { split_k_args(args, plan.slices) };
    let (shader, entry, _) = tiles_kernel(plan.kernel, fit_under(limits, &run));
    (shader.name, entry)
}

/// The vec4 large tile (128×256 or 256×128) and power-of-two slice count (slices at least
/// [`SPLIT_K_MIN_SLICE`] long) that take the least time: waves of [`WAVE_SMS`] workgroups
/// times slice length (both tiles hold as many outputs), plus the partials' round trip through
/// memory ([`PARTIAL_OUTPUTS_PER_K_STEP`]). Ties go to fewer slices, then to the wide tile.
/// Batched products are not split.
fn fewest_waves(args: &MatmulArgs) -> MatmulPlan {
    let mut best = (usize::MAX, MatmulPlan { kernel: MatmulKernel::Wide, slices: 1 });
    let mut slices = 1;
    let most = if args.batch == 1 { SPLIT_K_MAX_SLICES } else { 1 };
    while slices <= most && (slices == 1 || splits_aligned(args.k, slices)) {
        for (kernel, [rows, cols]) in [(MatmulKernel::Wide, VEC4_LARGE_TILE), (MatmulKernel::Tall, VEC4_TALL_TILE)] {
            let groups = args.m.div_ceil(rows) * args.n.div_ceil(cols) * args.batch * slices;
            let partials = if slices > 1 { slices * args.m * args.n / PARTIAL_OUTPUTS_PER_K_STEP } else { 0 };
            let cost = groups.div_ceil(WAVE_SMS) * (args.k / slices) + partials;
            if cost < best.0 {
                best = (cost, MatmulPlan { kernel, slices });
            }
        }
        slices *= 2;
    }
    best.1
}

/// Its shared memory: two operands, K slices of 32, unpadded rows of 32 and 64 vec4. Adapters
/// with less (WebGPU's minimum is 16 KiB) or fewer invocations per workgroup (256) take the
/// strided kernel.
const VEC4_LARGE_SHARED_BYTES: u32 = (32 * 32 + 32 * 64) * 16;

kernel_params! {
    /// All three matmul shaders: `batch` products of `[m, k]` by `[k, n]`, each operand at its
    /// offset and batch, row and column strides.
    struct MatmulParams {
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
}

impl MatmulParams {
    fn of(args: &MatmulArgs) -> MatmulParams {
        let (a, b) = (&args.lhs, &args.rhs);
        let [batch, m, k, n] = [args.batch, args.m, args.k, args.n].map(|v| v as u32);
        let [lhs_offset, lhs_batch, lhs_row, lhs_col] =
            [a.offset, a.batch_stride, a.row_stride, a.col_stride].map(|v| v as u32);
        let [rhs_offset, rhs_batch, rhs_row, rhs_col] =
            [b.offset, b.batch_stride, b.row_stride, b.col_stride].map(|v| v as u32);
        MatmulParams {
            batch,
            m,
            k,
            n,
            lhs_offset,
            lhs_batch,
            lhs_row,
            lhs_col,
            rhs_offset,
            rhs_batch,
            rhs_row,
            rhs_col,
        }
    }
}

/// The last element an operand of `batch` `[rows, cols]` matrices at layout `l` reads.
fn matrix_extent(l: &MatrixLayout, rows: usize, cols: usize, batch: usize) -> usize {
    l.offset
        + batch.saturating_sub(1) * l.batch_stride
        + rows.saturating_sub(1) * l.row_stride
        + cols.saturating_sub(1) * l.col_stride
}

/// Whether `l` can be read as vec4s along its contiguous side: that side (`cols` when the
/// columns are contiguous, `rows` when transposed) a multiple of 4, and every other stride and
/// the offset too, so each vec4 starts on a 16-byte boundary. Which side counts as contiguous
/// must match the kernel's own test (`col_stride == 1` first).
fn vec4_readable(l: &MatrixLayout, rows: usize, cols: usize, batch: usize) -> bool {
    let aligned = |v: usize| v.is_multiple_of(4);
    let along = if l.col_stride == 1 {
        aligned(cols) && aligned(l.row_stride)
    } else {
        l.row_stride == 1 && aligned(rows) && aligned(l.col_stride)
    };
    along && (batch == 1 || aligned(l.batch_stride)) && aligned(l.offset)
}

impl WgpuBackend {
    /// See [`Device::set_matmul_precision`](crate::Device::set_matmul_precision). Turning tensor
    /// cores on compiles their kernels (the matmul's and the convolution's) at once, so a driver
    /// that rejects them fails here.
    pub fn set_matmul_precision(&self, precision: MatmulPrecision) -> Result<()> {
        let tensor_cores = precision == MatmulPrecision::F16TensorCores;
        if tensor_cores {
            if !self.ctx.tensor_cores {
                return Err(Error::Gpu(format!(
                    "{} has no tensor-core matmul: it needs cooperative matrices with f16 inputs and f32 \
                     accumulation (16x16x16), SHADER_F16 and subgroups of 32; use MatmulPrecision::F32",
                    self.ctx.adapter_name()
                )));
            }
            coop_tiles::fits(&self.ctx.limits).map_err(|e| Error::Gpu(format!("{}: {e}", self.ctx.adapter_name())))?;
            for shader in &pipelines::MATMUL_COOP {
                self.pipelines.get(&self.ctx.device, shader, "matmul_large", &SIGNATURE)?;
            }
            for shader in super::conv2d_coop::SHADERS {
                self.pipelines.get(&self.ctx.device, shader, super::conv2d_coop::ENTRY, &super::conv2d::SIGNATURE)?;
            }
        }
        self.tensor_core_matmul.store(tensor_cores, Ordering::Relaxed);
        Ok(())
    }

    /// The precision matmuls run at on this backend: [`MatmulPrecision::F32`] unless
    /// `set_matmul_precision` turned tensor cores on.
    pub fn matmul_precision(&self) -> MatmulPrecision {
        if self.tensor_core_matmul.load(Ordering::Relaxed) {
            MatmulPrecision::F16TensorCores
        } else {
            MatmulPrecision::F32
        }
    }

    pub(super) fn matmul_dispatch(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        self.matmul_with_plan(lhs, rhs, args, self.matmul_plan(args))
    }

    /// The plan [`Backend::matmul`](crate::backend::Backend::matmul) runs `args` with (at
    /// [`MatmulPrecision::F32`]; on tensor cores the vec4 tiles give way to theirs).
    pub fn matmul_plan(&self, args: &MatmulArgs) -> MatmulPlan {
        choose_plan(args, self.fit(args))
    }

    fn fit(&self, args: &MatmulArgs) -> Fit {
        fit_under(&self.ctx.limits, args)
    }

    /// Whether this adapter has the workgroup memory and invocations of the vec4 large tiles
    /// ([`MatmulKernel::Wide`] and [`MatmulKernel::Tall`] on vec4 operands).
    pub(super) fn large_tiles_fit(&self) -> bool {
        let l = &self.ctx.limits;
        l.max_compute_workgroup_storage_size >= VEC4_LARGE_SHARED_BYTES
            && l.max_compute_invocations_per_workgroup >= VEC4_LARGE_INVOCATIONS
    }

    /// The product `args` describes, computed as `plan` says; any plan gives the same values up
    /// to rounding. Errors for a layout reaching past its storage, a slice count that is zero or
    /// does not divide `k` (or splits a batched product), [`MatmulKernel::Tall`] where the
    /// operands cannot be read as vec4 or the adapter lacks the shared memory or invocations,
    /// and [`MatmulKernel::Square`] where they cannot be read as vec4.
    /// For the kernel lab and tests; [`Backend::matmul`](crate::backend::Backend::matmul) uses
    /// [`WgpuBackend::matmul_plan`].
    pub fn matmul_with_plan(
        &self,
        lhs: &Storage,
        rhs: &Storage,
        args: &MatmulArgs,
        plan: MatmulPlan,
    ) -> Result<Storage> {
        self.matmul_at(lhs, rhs, args, plan, self.matmul_precision())
    }

    /// [`WgpuBackend::matmul_with_plan`] at `precision` instead of the backend's: for a caller
    /// that knows its products waste the tensor-core tile (Winograd's at few channels).
    /// `F16TensorCores` is honoured only where the backend turned tensor cores on (the kernel is
    /// compiled and the adapter checked then); elsewhere the product runs in f32.
    pub(super) fn matmul_at(
        &self,
        lhs: &Storage,
        rhs: &Storage,
        args: &MatmulArgs,
        plan: MatmulPlan,
        precision: MatmulPrecision,
    ) -> Result<Storage> {
        let tensor_cores =
            precision == MatmulPrecision::F16TensorCores && self.matmul_precision() == MatmulPrecision::F16TensorCores;
        let (l, r) = (self.gpu(lhs, DType::F32, "matmul")?, self.gpu(rhs, DType::F32, "matmul")?);
        if args.k > 0 && args.batch * args.m * args.n > 0 {
            if matrix_extent(&args.lhs, args.m, args.k, args.batch) >= l.len() {
                return Err(Error::invalid("matmul", "lhs layout reaches past its storage"));
            }
            if matrix_extent(&args.rhs, args.k, args.n, args.batch) >= r.len() {
                return Err(Error::invalid("matmul", "rhs layout reaches past its storage"));
            }
        }
        let slices = plan.slices;
        if slices == 0 || !args.k.is_multiple_of(slices) || (slices > 1 && args.batch != 1) {
            return Err(Error::invalid(
                "matmul",
                format!(
                    "{slices} k slices for a batch of {} with k = {}: want a divisor of k, and batch 1 to split",
                    args.batch, args.k
                ),
            ));
        }
        // What the kernel runs is the split product: its slices' offsets (batch strides of
        // `k / slices` columns) decide whether vec4 loads stay aligned, so the fit is its own.
        let run = if slices == 1 { *args } else { split_k_args(args, slices) };
        let fit = self.fit(&run);
        if plan.kernel == MatmulKernel::Tall && !(fit.vec4 && fit.large) {
            return Err(Error::invalid(
                "matmul",
                format!("the 256x128 tile needs vec4 operands and large tiles ({fit:?})"),
            ));
        }
        if plan.kernel == MatmulKernel::Square && !fit.vec4 {
            return Err(Error::invalid("matmul", format!("the 128x128 vec4 tile needs vec4 operands ({fit:?})")));
        }
        if slices == 1 {
            return self.matmul_tiles(lhs, rhs, args, plan.kernel, fit, tensor_cores);
        }
        let partial = self.matmul_tiles(lhs, rhs, &run, plan.kernel, fit, tensor_cores)?;
        let dims = ReduceDims { outer: 1, len: slices, inner: args.m * args.n };
        self.reduce_kernel(ReduceOp::Sum, &partial, dims)
    }

    /// The product on `kernel` (checked against `fit` by the caller), or on a stand-in while
    /// that compiles; on the tensor-core tiles instead where `tensor_cores` and the operands
    /// read as vec4.
    fn matmul_tiles(
        &self,
        lhs: &Storage,
        rhs: &Storage,
        args: &MatmulArgs,
        kernel: MatmulKernel,
        fit: Fit,
        tensor_cores: bool,
    ) -> Result<Storage> {
        let (l, r) = (self.gpu(lhs, DType::F32, "matmul")?, self.gpu(rhs, DType::F32, "matmul")?);
        let n_out = args.batch * args.m * args.n;
        let out = self.alloc(n_out, DType::F32, "matmul")?;
        if n_out == 0 {
            return Ok(self.output(out));
        }
        let params = MatmulParams::of(args);
        let buffers = [bind(l), bind(r), bind(&out)];
        let small = || -> Result<Storage> {
            let groups = self.groups_for(n_out, "matmul")?;
            self.run(&pipelines::MATMUL, "matmul_small", &SIGNATURE, &params, &buffers, groups)?;
            Ok(self.output(out.clone()))
        };
        if kernel == MatmulKernel::PerOutput {
            return small();
        }
        // Workgroups of [rows, columns] tiles; the kernels' grid-stride loops cover what a
        // capped dimension leaves out.
        let max = self.max_groups;
        let grid = |[rows, cols]: [usize; 2]| {
            [args.n.div_ceil(cols), args.m.div_ceil(rows), args.batch].map(|g| g.min(max) as u32)
        };
        if fit.vec4 && tensor_cores {
            let shader = coop_tiles::matmul_shader(args.lhs.col_stride == 1, args.rhs.col_stride == 1);
            self.run(shader, "matmul_large", &SIGNATURE, &params, &buffers, grid(coop_tiles::TILE))?;
            return Ok(self.output(out));
        }
        let large = matches!(kernel, MatmulKernel::Wide | MatmulKernel::Tall | MatmulKernel::Square);
        let (shader, entry, tile) = tiles_kernel(kernel, fit);
        // Until that kernel is compiled (see `Pipelines::stand_in`): the same shader's 64-tile
        // kernel if it is ready, else (for a small product) one invocation per output, else wait.
        let (entry, tile) = if !self.pipelines.stand_in(shader, entry) {
            (entry, tile)
        } else if large && self.pipelines.state(shader, "matmul") == KernelState::Compiled {
            ("matmul", [64, 64])
        } else if n_out.saturating_mul(args.k) <= STAND_IN_MAX_MACS {
            return small();
        } else {
            (entry, tile)
        };
        self.run(shader, entry, &SIGNATURE, &params, &buffers, grid(tile))?;
        Ok(self.output(out))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::pipelines::{KernelState, MATMUL, MATMUL_VEC4, REDUCE};
    use super::super::test_data::{normal, read};
    use super::super::WgpuBackend;
    use super::{choose_plan, split_k_args, split_k_slices, Fit, MatmulKernel, MatmulPlan};
    use super::{VEC4_LARGE_INVOCATIONS, VEC4_LARGE_SHARED_BYTES, VEC4_LARGE_TILE, VEC4_SQUARE_TILE, VEC4_TALL_TILE};
    use crate::backend::{Backend, MatmulArgs, MatrixLayout, ReduceDims, ReduceOp};
    use crate::testing::assert_close;

    #[test]
    fn split_k_fills_the_gpu_only_for_few_tiles_and_long_k() {
        let args = |m: usize, k: usize, n: usize| {
            let l = MatrixLayout { offset: 0, batch_stride: 0, row_stride: k, col_stride: 1 };
            let r = MatrixLayout { offset: 0, batch_stride: 0, row_stride: n, col_stride: 1 };
            MatmulArgs { batch: 1, m, k, n, lhs: l, rhs: r }
        };
        // A transformer's weight gradient: 108 tiles, k = 64·256 tokens.
        assert_eq!(split_k_slices(&args(1152, 16384, 384)), 8);
        assert_eq!(split_k_slices(&args(84, 16384, 384)), 64);
        // Enough tiles, a short k, or a k with no power-of-two slice of 256: no split.
        assert_eq!(split_k_slices(&args(16384, 384, 1152)), 1);
        assert_eq!(split_k_slices(&args(64, 300, 64)), 1);
        assert_eq!(split_k_slices(&args(64, 16383, 64)), 1);
        let split = split_k_args(&args(1152, 16384, 384), 8);
        assert_eq!((split.batch, split.k, split.lhs.batch_stride, split.rhs.batch_stride), (8, 2048, 2048, 2048 * 384));
    }

    /// The GPT's linear layers (16384 tokens): the large tile and slice count that take the
    /// fewest waves of 132 workgroups, for weight gradients with enough outputs too; strided
    /// operands or adapters without the large tiles' resources keep the 64×64 split; a short
    /// side runs one invocation per output.
    #[test]
    fn plans_for_a_transformers_products() {
        let args = |m: usize, k: usize, n: usize, lhs_transposed: bool| {
            let l = if lhs_transposed {
                MatrixLayout { offset: 0, batch_stride: 0, row_stride: 1, col_stride: m }
            } else {
                MatrixLayout::row_major(m, k)
            };
            MatmulArgs { batch: 1, m, k, n, lhs: l, rhs: MatrixLayout::row_major(k, n) }
        };
        let fit = Fit { vec4: true, large: true };
        let plan = |kernel, slices| MatmulPlan { kernel, slices };
        use MatmulKernel::{PerOutput, Tall, Tile64, Wide};
        assert_eq!(choose_plan(&args(16384, 384, 1152, false), fit), plan(Wide, 1));
        assert_eq!(choose_plan(&args(16384, 384, 384, false), fit), plan(Wide, 1));
        // [1152, 16384] @ [16384, 384]: 120 tall tiles in 8 slices fill one wave of 132.
        assert_eq!(choose_plan(&args(1152, 16384, 384, true), fit), plan(Tall, 8));
        assert_eq!(choose_plan(&args(1536, 16384, 384, true), fit), plan(Tall, 32));
        assert_eq!(choose_plan(&args(384, 16384, 1536, true), fit), plan(Wide, 32));
        // Few outputs: 64×64 tiles in the slices of `split_k_slices`.
        assert_eq!(choose_plan(&args(384, 16384, 384, true), fit), plan(Tile64, 16));
        assert_eq!(choose_plan(&args(84, 16384, 384, true), fit), plan(Tile64, 64));
        // n = 384 and a k of 1152: 192 tall tiles in 2 slices, 2.9 waves of 576 k steps,
        // against 2 waves of 1152 unsplit.
        assert_eq!(choose_plan(&args(16384, 1152, 384, false), fit), plan(Tall, 2));
        // 4096³ fills whole waves unsplit; 1024³ (256 tiles of 64×64) is split: 128 wide tiles
        // in 4 slices, one wave.
        assert_eq!(choose_plan(&args(4096, 4096, 4096, false), fit), plan(Wide, 1));
        assert_eq!(choose_plan(&args(1024, 1024, 1024, false), fit), plan(Wide, 4));
        assert_eq!(choose_plan(&args(1024, 1024, 1024, false), strided_fit()), plan(Tile64, 2));
        assert_eq!(choose_plan(&args(1024, 1001, 1024, false), fit), plan(Tile64, 1));
        assert_eq!(choose_plan(&args(4096, 4096, 4096, false), strided_fit()), plan(Wide, 1));
        // A batch is never split, a short k never: both unsplit on the tile of fewest waves.
        let batched = MatmulArgs { batch: 16, ..args(1152, 2048, 384, false) };
        assert_eq!(choose_plan(&batched, fit), plan(Tall, 1));
        assert_eq!(choose_plan(&args(16384, 200, 384, false), fit), plan(Wide, 1));
        let no_large = Fit { vec4: true, large: false };
        assert_eq!(choose_plan(&args(1152, 16384, 384, true), no_large), plan(Tile64, 8));
        let strided = strided_fit();
        assert_eq!(choose_plan(&args(1152, 16384, 384, true), strided), plan(Tile64, 8));
        assert_eq!(choose_plan(&args(15, 16384, 384, true), fit), plan(PerOutput, 1));
    }

    fn strided_fit() -> Fit {
        Fit { vec4: false, large: true }
    }

    /// Every plan computes the same product: each kernel, split or not, on row-major and
    /// transposed operands with partial tiles; invalid plans are errors.
    #[test]
    fn every_plan_matches_the_dispatchers() {
        let Some(crate::Device::Wgpu(b)) = crate::testing::wgpu_or_skip() else { return };
        let (m, k, n) = (40, 512, 36);
        let (lhs, rhs) = (normal(&b, m * k, 3), normal(&b, k * n, 4));
        for transposed in [false, true] {
            let lhs_layout = if transposed {
                MatrixLayout { offset: 0, batch_stride: 0, row_stride: 1, col_stride: m }
            } else {
                MatrixLayout::row_major(m, k)
            };
            let args = MatmulArgs { batch: 1, m, k, n, lhs: lhs_layout, rhs: MatrixLayout::row_major(k, n) };
            let want = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
            let large = b.fit(&args).large;
            let kernels = [MatmulKernel::PerOutput, MatmulKernel::Tile64, MatmulKernel::Wide, MatmulKernel::Tall];
            for kernel in kernels.into_iter().chain([MatmulKernel::Square]) {
                for slices in [1, 2, 8] {
                    let plan = MatmulPlan { kernel, slices };
                    let got = b.matmul_with_plan(&lhs, &rhs, &args, plan);
                    if kernel == MatmulKernel::Tall && !large {
                        assert!(got.is_err(), "{plan:?} without the large tiles' resources");
                        continue;
                    }
                    assert_close(&format!("{plan:?} transposed {transposed}"), &read(&b, &got.unwrap()), &want, 1e-4);
                }
            }
            for slices in [0, 3] {
                let plan = MatmulPlan { kernel: MatmulKernel::Wide, slices };
                assert!(b.matmul_with_plan(&lhs, &rhs, &args, plan).is_err(), "{slices} slices of k = {k}");
            }
        }
    }

    /// A split product equals the unsplit kernel's, for row-major and transposed operands (a
    /// weight gradient reads its left operand transposed), vec4 and strided.
    #[test]
    fn split_k_products_match_the_unsplit_kernel() {
        let Some(crate::Device::Wgpu(b)) = crate::testing::wgpu_or_skip() else { return };
        for (m, k, n, transposed) in [(64, 1024, 64, false), (36, 2048, 20, true), (70, 512, 16, true)] {
            let (lhs, rhs) = (normal(&b, m * k, 1), normal(&b, k * n, 2));
            let lhs_layout = if transposed {
                MatrixLayout { offset: 0, batch_stride: 0, row_stride: 1, col_stride: m }
            } else {
                MatrixLayout::row_major(m, k)
            };
            let args = MatmulArgs { batch: 1, m, k, n, lhs: lhs_layout, rhs: MatrixLayout::row_major(k, n) };
            assert!(split_k_slices(&args) > 1, "{m}x{k}x{n} is not split");
            let unsplit = MatmulPlan { kernel: MatmulKernel::Tile64, slices: 1 };
            let want = read(&b, &b.matmul_with_plan(&lhs, &rhs, &args, unsplit).unwrap());
            let got = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
            assert_close(&format!("split-k {m}x{k}x{n} transposed {transposed}"), &got, &want, 1e-4);
        }
    }

    /// Split-K with any `k` against the host's product in f64, operands row-major and transposed.
    /// A `k` whose slices are not a multiple of 4 long (2100 in 4 slices of 525) used to reach
    /// the vec4 kernels with slices starting mid-vec4, and gave wrong sums: it is not split that
    /// way any more, and an explicit plan that would split it so runs on aligned-safe loads.
    #[test]
    fn split_k_with_any_k_matches_the_host_product() {
        let Some(crate::Device::Wgpu(b)) = crate::testing::wgpu_or_skip() else { return };
        let cases = [(2060, 2100, 36, true), (64, 1028, 64, false), (40, 1300, 20, false), (64, 2052, 64, true)];
        for (m, k, n, rhs_transposed) in cases {
            let (lhs, rhs) = (normal(&b, m * k, 3), normal(&b, k * n, 4));
            let (a, w) = (read(&b, &lhs), read(&b, &rhs));
            let rhs_layout = if rhs_transposed {
                MatrixLayout { offset: 0, batch_stride: 0, row_stride: 1, col_stride: k }
            } else {
                MatrixLayout::row_major(k, n)
            };
            let at = |i: usize, j: usize| if rhs_transposed { w[j * k + i] } else { w[i * n + j] };
            let want: Vec<f32> = (0..m * n)
                .map(|o| (0..k).map(|kk| a[o / n * k + kk] as f64 * at(kk, o % n) as f64).sum::<f64>() as f32)
                .collect();
            let args = MatmulArgs { batch: 1, m, k, n, lhs: MatrixLayout::row_major(m, k), rhs: rhs_layout };
            let got = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
            // f32 sums of ~2000 unit-variance terms are off by ~1e-4 in any order; the misaligned
            // slices were off by several percent.
            assert_close(&format!("{m}x{k}x{n} (plan {:?})", b.matmul_plan(&args)), &got, &want, 1e-3);
            for slices in [2, 4] {
                let plan = MatmulPlan { kernel: MatmulKernel::Tile64, slices };
                if let Ok(out) = b.matmul_with_plan(&lhs, &rhs, &args, plan) {
                    assert_close(&format!("{m}x{k}x{n} in {slices} slices"), &read(&b, &out), &want, 1e-3);
                }
            }
        }
    }

    /// While the tiled kernels count as compiling on another thread, products run on the
    /// 64-tile kernel (for a 128-tile product, once that is compiled) or one invocation per
    /// output, and long-row sums on the column kernel, with the usual kernels' results. A
    /// backend of its own, so that no other test sees those kernels held.
    #[test]
    fn stand_ins_match_the_kernels_they_replace() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let b = WgpuBackend::independent().unwrap();
        // 64-tile products first, vec4 and strided (a side of 34), then 256 tiles of 128 both ways.
        let products = [(1, 40, 36, 24), (1, 40, 34, 24), (16, 512, 8, 512), (16, 512, 6, 512)];
        for (k, (batch, m, kk, n)) in products.into_iter().enumerate() {
            let (lhs, rhs) = (normal(&b, batch * m * kk, 2 * k as u32), normal(&b, kk * n, 2 * k as u32 + 1));
            let args = MatmulArgs {
                batch,
                m,
                k: kk,
                n,
                lhs: MatrixLayout::row_major(m, kk),
                rhs: MatrixLayout { batch_stride: 0, ..MatrixLayout::row_major(kk, n) },
            };
            let want = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
            for held in [&["matmul_large"][..], &["matmul_large", "matmul"]] {
                let slots: Vec<_> = [&MATMUL, &MATMUL_VEC4]
                    .iter()
                    .flat_map(|shader| held.iter().map(|entry| b.pipelines.hold_as_compiling(shader, entry)))
                    .collect();
                let locks: Vec<_> = slots.iter().map(|slot| slot.lock().unwrap()).collect();
                let got = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
                drop(locks);
                assert_close(&format!("[{batch}, {m}, {kk}] @ [{kk}, {n}] with {held:?} compiling"), &got, &want, 1e-4);
            }
        }
        assert_eq!(b.pipelines.state(&MATMUL, "matmul_small"), KernelState::Compiled, "matmul_small never ran");

        let x = normal(&b, 3 * 5000, 9);
        let dims = ReduceDims { outer: 3, len: 5000, inner: 1 };
        let want = read(&b, &b.reduce(ReduceOp::Sum, &x, dims).unwrap());
        let slots = ["reduce_rows", "reduce_rows4"].map(|entry| b.pipelines.hold_as_compiling(&REDUCE, entry));
        let locks: Vec<_> = slots.iter().map(|slot| slot.lock().unwrap()).collect();
        let got = read(&b, &b.reduce(ReduceOp::Sum, &x, dims).unwrap());
        drop(locks);
        assert_close("row sums while reduce_rows compiles", &got, &want, 1e-4);
    }

    /// The value of `const NAME: u32 = <value>u;` in a shader.
    pub(in super::super) fn shader_const(source: &str, name: &str) -> u32 {
        let prefix = format!("const {name}: u32 = ");
        let line = source.lines().find_map(|l| l.strip_prefix(prefix.as_str())).expect("constant in shader");
        line.trim_end_matches(';').trim_end_matches('u').parse().expect("integer constant")
    }

    /// The constants follow the generated shader (`tools/gen/matmul.py`).
    #[test]
    fn vec4_large_constants_match_the_shader() {
        let source = include_str!("../../../shaders/matmul_vec4.wgsl");
        let vec4s: u32 = source
            .lines()
            .filter_map(|l| l.strip_prefix("var<workgroup> l"))
            .filter_map(|l| l.split(", ").nth(1)?.strip_suffix(">;")?.parse::<u32>().ok())
            .sum();
        assert_eq!(vec4s * 16, VEC4_LARGE_SHARED_BYTES);
        let tile = [shader_const(source, "LTILE_M"), shader_const(source, "LTILE_N")];
        assert_eq!(tile.map(|t| t as usize), VEC4_LARGE_TILE);
        let tall = [shader_const(source, "TTILE_M"), shader_const(source, "TTILE_N")];
        assert_eq!(tall.map(|t| t as usize), VEC4_TALL_TILE);
        let tall_vec4s: u32 = source
            .lines()
            .filter_map(|l| l.strip_prefix("var<workgroup> t"))
            .filter_map(|l| l.split(", ").nth(1)?.strip_suffix(">;")?.parse::<u32>().ok())
            .sum();
        assert_eq!(tall_vec4s * 16, VEC4_LARGE_SHARED_BYTES);
        let square = [shader_const(source, "QTILE_M"), shader_const(source, "QTILE_N")];
        assert_eq!(square.map(|t| t as usize), VEC4_SQUARE_TILE);
        for (i, entry) in [(2, "matmul_large"), (3, "matmul_tall")] {
            let size = source.split("@workgroup_size(").nth(i).expect(entry);
            let size: Vec<u32> = size[..size.find(')').unwrap()].split(", ").map(|v| v.parse().unwrap()).collect();
            assert_eq!(size.iter().product::<u32>(), VEC4_LARGE_INVOCATIONS, "{entry}");
        }
    }
}
