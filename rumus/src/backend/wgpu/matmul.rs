//! Matmul dispatch: which of the kernels in `matmul.wgsl` / `matmul_vec4.wgsl` a product takes.

use super::pipelines::{self, Access};
use super::{bind, gpu, matrix_extent, WgpuBackend};
use crate::backend::{DType, MatmulArgs, MatrixLayout, Storage};
use crate::{Error, Result};

/// Below this many 128×128 tiles the 64×64 kernel keeps more of a big GPU busy: on the H200
/// (132 SMs) 1024³ runs at 27 TFLOP/s in 64×64 tiles but 14 in 128×128 ones; from 2048³ (256
/// tiles) the large tile wins (35 against 30). Measured with `examples/matmul_lab.rs`.
const MIN_LARGE_TILES: usize = 256;

/// Shared memory of `matmul_large` in `matmul_vec4.wgsl`: two operands, two buffers, K slices of
/// 8, rows of 33 vec4. Adapters with less (WebGPU's minimum is 16 KiB) take the strided kernel.
const VEC4_LARGE_SHARED_BYTES: u32 = 2 * 2 * 8 * 33 * 16;

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
    pub(super) fn matmul_dispatch(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        let (l, r) = (gpu(lhs, DType::F32, "matmul")?, gpu(rhs, DType::F32, "matmul")?);
        let n_out = args.batch * args.m * args.n;
        let out = self.alloc(n_out, DType::F32, "matmul")?;
        if n_out == 0 {
            return Ok(self.output(out));
        }
        if args.k > 0 {
            if matrix_extent(&args.lhs, args.m, args.k, args.batch) >= l.len() {
                return Err(Error::invalid("matmul", "lhs layout reaches past its storage"));
            }
            if matrix_extent(&args.rhs, args.k, args.n, args.batch) >= r.len() {
                return Err(Error::invalid("matmul", "rhs layout reaches past its storage"));
            }
        }
        let (a, b) = (&args.lhs, &args.rhs);
        let params = [
            args.batch,
            args.m,
            args.k,
            args.n,
            a.offset,
            a.batch_stride,
            a.row_stride,
            a.col_stride,
            b.offset,
            b.batch_stride,
            b.row_stride,
            b.col_stride,
        ]
        .map(|v| v as u32);
        let buffers = [bind(l), bind(r), bind(&out)];
        let signature = [Access::Read, Access::Read, Access::Write];
        // A short side would leave most of a tile idle: one invocation per output instead.
        if args.m < 16 || args.n < 16 {
            let groups = self.groups_for(n_out, "matmul")?;
            self.run(&pipelines::MATMUL, "matmul_small", &signature, &params, &buffers, groups)?;
            return Ok(self.output(out));
        }
        // Big products take 128×128 tiles (8×8 per invocation); the rest 64×64 (4×4), which
        // keep more workgroups busy.
        let large_tiles = args.m.div_ceil(128) * args.n.div_ceil(128) * args.batch;
        let tile = if large_tiles >= MIN_LARGE_TILES { 128 } else { 64 };
        let max = self.max_groups;
        let groups =
            [args.n.div_ceil(tile).min(max) as u32, args.m.div_ceil(tile).min(max) as u32, args.batch.min(max) as u32];
        let entry = if tile == 128 { "matmul_large" } else { "matmul" };
        let shared = self.ctx.limits.max_compute_workgroup_storage_size;
        let vec4 = args.n.is_multiple_of(4)
            && (tile == 64 || shared >= VEC4_LARGE_SHARED_BYTES)
            && vec4_readable(a, args.m, args.k, args.batch)
            && vec4_readable(b, args.k, args.n, args.batch);
        let shader = if vec4 { &pipelines::MATMUL_VEC4 } else { &pipelines::MATMUL };
        self.run(shader, entry, &signature, &params, &buffers, groups)?;
        Ok(self.output(out))
    }
}

#[cfg(test)]
mod tests {
    use super::VEC4_LARGE_SHARED_BYTES;

    /// The constant follows the generated shader (`shaders/gen/matmul.py`).
    #[test]
    fn vec4_large_shared_bytes_match_the_shader() {
        let source = include_str!("../../../../shaders/matmul_vec4.wgsl");
        let vec4s: u32 = source
            .lines()
            .filter_map(|l| l.strip_prefix("var<workgroup> l"))
            .filter_map(|l| l.split(", ").nth(1)?.strip_suffix(">;")?.parse::<u32>().ok())
            .sum();
        assert_eq!(vec4s * 16, VEC4_LARGE_SHARED_BYTES);
    }
}
