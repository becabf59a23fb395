//! Matmul dispatch: which of the kernels in `matmul.wgsl` / `matmul_vec4.wgsl` /
//! `matmul_coop.wgsl` a product takes, and the device's matmul precision.

use std::sync::atomic::Ordering;

use super::launch::bind;
use super::params::kernel_params;
use super::pipelines::{self, Access, KernelState};
use super::{WgpuBackend, STAND_IN_MAX_MACS};
use crate::backend::{DType, MatmulArgs, MatrixLayout, ReduceDims, ReduceOp, Storage};
use crate::{Error, MatmulPrecision, Result};

/// Buffer bindings of every matmul kernel: lhs, rhs, out.
const SIGNATURE: [Access; 3] = [Access::Read, Access::Read, Access::Write];

/// Below this many 128×128 tiles the 64×64 kernel keeps more of a big GPU busy: on an H100
/// (132 SMs) 1024³ runs at 27 TFLOP/s in 64×64 tiles but 11 in the vec4 kernel's 128×256 ones
/// (17 in 128×128); from 2048³ (256 tiles of 128×128) the large tile wins (39 against 30).
/// Measured with `examples/matmul_lab.rs`.
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
    while tiles * slices < SPLIT_K_MIN_TILES
        && slices * 2 <= SPLIT_K_MAX_SLICES
        && args.k.is_multiple_of(slices * 2)
        && args.k / (slices * 2) >= SPLIT_K_MIN_SLICE
    {
        slices *= 2;
    }
    slices
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
const VEC4_LARGE_TILE: [usize; 2] = [128, 256];
const VEC4_LARGE_INVOCATIONS: u32 = 512;

/// Its shared memory: two operands, K slices of 32, unpadded rows of 32 and 64 vec4. Adapters
/// with less (WebGPU's minimum is 16 KiB) or fewer invocations per workgroup (256) take the
/// strided kernel.
const VEC4_LARGE_SHARED_BYTES: u32 = (32 * 32 + 32 * 64) * 16;

/// Shared memory of `matmul_coop.wgsl`: two operands, two buffers of 128×40 halves (the larger
/// of its two slice shapes), plus 8 subgroups' 16×16 f32 edge blocks.
const COOP_SHARED_BYTES: u32 = 2 * 2 * 128 * 40 * 2 + 8 * 256 * 4;

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
    /// cores on compiles their kernel at once, so a driver that rejects it fails here.
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
            if self.ctx.limits.max_compute_workgroup_storage_size < COOP_SHARED_BYTES {
                return Err(Error::Gpu(format!(
                    "{} offers {} bytes of workgroup memory; the tensor-core matmul needs {COOP_SHARED_BYTES}",
                    self.ctx.adapter_name(),
                    self.ctx.limits.max_compute_workgroup_storage_size
                )));
            }
            self.pipelines.get(&self.ctx.device, &pipelines::MATMUL_COOP, "matmul_large", &SIGNATURE)?;
        }
        self.tensor_core_matmul.store(tensor_cores, Ordering::Relaxed);
        Ok(())
    }

    pub fn matmul_precision(&self) -> MatmulPrecision {
        if self.tensor_core_matmul.load(Ordering::Relaxed) {
            MatmulPrecision::F16TensorCores
        } else {
            MatmulPrecision::F32
        }
    }

    pub(super) fn matmul_dispatch(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        let (l, r) = (self.gpu(lhs, DType::F32, "matmul")?, self.gpu(rhs, DType::F32, "matmul")?);
        if args.k > 0 && args.batch * args.m * args.n > 0 {
            if matrix_extent(&args.lhs, args.m, args.k, args.batch) >= l.len() {
                return Err(Error::invalid("matmul", "lhs layout reaches past its storage"));
            }
            if matrix_extent(&args.rhs, args.k, args.n, args.batch) >= r.len() {
                return Err(Error::invalid("matmul", "rhs layout reaches past its storage"));
            }
        }
        let slices = split_k_slices(args);
        if slices == 1 {
            return self.matmul_tiles(lhs, rhs, args);
        }
        let partial = self.matmul_tiles(lhs, rhs, &split_k_args(args, slices))?;
        let dims = ReduceDims { outer: 1, len: slices, inner: args.m * args.n };
        self.reduce_kernel(ReduceOp::Sum, &partial, dims)
    }

    /// The product on one of the tiled kernels (or one invocation per output).
    fn matmul_tiles(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        let (l, r) = (self.gpu(lhs, DType::F32, "matmul")?, self.gpu(rhs, DType::F32, "matmul")?);
        let n_out = args.batch * args.m * args.n;
        let out = self.alloc(n_out, DType::F32, "matmul")?;
        if n_out == 0 {
            return Ok(self.output(out));
        }
        let (a, b) = (&args.lhs, &args.rhs);
        let params = MatmulParams::of(args);
        let buffers = [bind(l), bind(r), bind(&out)];
        let small = || -> Result<Storage> {
            let groups = self.groups_for(n_out, "matmul")?;
            self.run(&pipelines::MATMUL, "matmul_small", &SIGNATURE, &params, &buffers, groups)?;
            Ok(self.output(out.clone()))
        };
        // A short side would leave most of a tile idle: one invocation per output instead.
        if args.m < 16 || args.n < 16 {
            return small();
        }
        let vec4 = args.n.is_multiple_of(4)
            && vec4_readable(a, args.m, args.k, args.batch)
            && vec4_readable(b, args.k, args.n, args.batch);
        // Workgroups of [rows, columns] tiles; the kernels' grid-stride loops cover what a
        // capped dimension leaves out.
        let max = self.max_groups;
        let grid = |[rows, cols]: [usize; 2]| {
            [args.n.div_ceil(cols), args.m.div_ceil(rows), args.batch].map(|g| g.min(max) as u32)
        };
        if vec4 && self.tensor_core_matmul.load(Ordering::Relaxed) {
            self.run(&pipelines::MATMUL_COOP, "matmul_large", &SIGNATURE, &params, &buffers, grid([128, 128]))?;
            return Ok(self.output(out));
        }
        // Big products take the large tiles (8×8 per invocation); the rest 64×64 (4×4), which
        // keep more workgroups busy.
        let large = args.m.div_ceil(128) * args.n.div_ceil(128) * args.batch >= MIN_LARGE_TILES;
        let limits = &self.ctx.limits;
        let vec4 = vec4
            && (!large
                || (limits.max_compute_workgroup_storage_size >= VEC4_LARGE_SHARED_BYTES
                    && limits.max_compute_invocations_per_workgroup >= VEC4_LARGE_INVOCATIONS));
        let (shader, large_tile) =
            if vec4 { (&pipelines::MATMUL_VEC4, VEC4_LARGE_TILE) } else { (&pipelines::MATMUL, [128, 128]) };
        let (entry, tile) = if large { ("matmul_large", large_tile) } else { ("matmul", [64, 64]) };
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
mod tests {
    use super::super::pipelines::{KernelState, MATMUL, MATMUL_VEC4, REDUCE};
    use super::super::test_data::{normal, read};
    use super::super::WgpuBackend;
    use super::{split_k_args, split_k_slices};
    use super::{COOP_SHARED_BYTES, VEC4_LARGE_INVOCATIONS, VEC4_LARGE_SHARED_BYTES, VEC4_LARGE_TILE};
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
            let want = read(&b, &b.matmul_tiles(&lhs, &rhs, &args).unwrap());
            let got = read(&b, &b.matmul(&lhs, &rhs, &args).unwrap());
            assert_close(&format!("split-k {m}x{k}x{n} transposed {transposed}"), &got, &want, 1e-4);
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
        let slot = b.pipelines.hold_as_compiling(&REDUCE, "reduce_rows");
        let lock = slot.lock().unwrap();
        let got = read(&b, &b.reduce(ReduceOp::Sum, &x, dims).unwrap());
        drop(lock);
        assert_close("row sums while reduce_rows compiles", &got, &want, 1e-4);
    }

    /// The value of `const NAME: u32 = <value>u;` in a shader.
    fn shader_const(source: &str, name: &str) -> u32 {
        let prefix = format!("const {name}: u32 = ");
        let line = source.lines().find_map(|l| l.strip_prefix(prefix.as_str())).expect("constant in shader");
        line.trim_end_matches(';').trim_end_matches('u').parse().expect("integer constant")
    }

    /// The constant follows the tensor-core shader's tile and K slice (rows padded by 8 halves).
    #[test]
    fn coop_shared_bytes_match_the_shader() {
        let source = include_str!("../../../shaders/matmul_coop.wgsl");
        let (tile, bk) = (shader_const(source, "TILE"), shader_const(source, "BK"));
        let slice = (tile * (bk + 8)).max(bk * (tile + 8));
        assert_eq!(2 * 2 * slice * 2 + 8 * 256 * 4, COOP_SHARED_BYTES);
    }

    /// The constants follow the generated shader (`rumus/shaders/gen/matmul.py`).
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
        let size = source.split("@workgroup_size(").nth(2).expect("matmul_large's workgroup size");
        let size: Vec<u32> = size[..size.find(')').unwrap()].split(", ").map(|v| v.parse().unwrap()).collect();
        assert_eq!(size.iter().product::<u32>(), VEC4_LARGE_INVOCATIONS);
    }
}
