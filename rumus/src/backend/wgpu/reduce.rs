//! Reductions over `[outer, len, inner]`: `reduce.wgsl` (sum, max, min, whose op codes are
//! written here once and placed before the shader as `OP_*` constants; and the sum of the
//! squares of several storages) and `argmax.wgsl`.

use super::elementwise::op_constants;
use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, ReduceDims, ReduceOp, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

/// Rows up to this long get one invocation each (softmax, cross-entropy, reductions); longer
/// rows get a workgroup each.
pub(super) const SHORT_ROW: usize = 32;
/// A reduction of few long rows splits them until about this many workgroups (of 64) share the
/// work (an H100's 132 SMs hold 32 each)...
const SPREAD_GROUPS: usize = 4096;
/// ...but never into chunks shorter than this.
const MIN_CHUNK: usize = 4096;
/// A column reduction with few outputs splits the reduced axis until about this many
/// invocations share the work, in chunks of at least `MIN_COL_CHUNK`.
const SPREAD_THREADS: usize = 65_536;
const MIN_COL_CHUNK: usize = 64;
/// How a column reduction of `len` rows into `outputs` outputs splits the rows: `(chunks,
/// chunk_len)`, chunks until about [`SPREAD_THREADS`] invocations (one per output and chunk)
/// share the work, each at least [`MIN_COL_CHUNK`] rows; the last chunks may be short or empty.
pub(super) fn column_chunks(len: usize, outputs: usize) -> (usize, usize) {
    let chunks = SPREAD_THREADS.div_ceil(outputs.max(1)).clamp(1, len.div_ceil(MIN_COL_CHUNK).max(1));
    (chunks, len.div_ceil(chunks).max(1))
}

/// `sum_squares` gives a storage a workgroup per this many elements, up to
/// `SQUARES_MAX_GROUPS` (each then walks its share with a grid stride)...
const SQUARES_PER_GROUP: usize = 8192;
const SQUARES_MAX_GROUPS: usize = 256;
/// ...and reads at most this many (its indices, two strides past the last, stay below 2^32).
const SQUARES_MAX_LEN: usize = (1 << 31) - 1;

/// Every reduction, for `reduce.wgsl`'s `OP_*` constants; its code is its position.
const REDUCE_OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

/// The constants placed before `reduce.wgsl`.
pub(super) fn reduce_constants() -> String {
    op_constants(REDUCE_OPS.iter().map(|&op| (name(op), code(op))))
}

/// `op`'s switch value in `reduce.wgsl`.
fn code(op: ReduceOp) -> u32 {
    op as u32
}

fn name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}

/// What a reduction of nothing gives.
fn identity(op: ReduceOp) -> f32 {
    match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Max => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
    }
}

kernel_params! {
    /// `reduce.wgsl`: `reduce_rows` produces `outer` rows (outer × chunks), `reduce_cols`
    /// reduces `[outer, len, inner]`; each output reduces a chunk of `chunk_len`.
    struct ReduceParams {
        outer: u32,
        len: u32,
        inner: u32,
        op: u32,
        identity: f32,
        chunks: u32,
        chunk_len: u32,
        nan: f32,
    }
}

kernel_params! {
    /// `argmax.wgsl`: the first largest index along `len` of `[outer, len, inner]`.
    struct ArgmaxParams {
        outer: u32,
        len: u32,
        inner: u32,
        neg_inf: f32,
    }
}

impl WgpuBackend {
    pub(super) fn reduce_kernel(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "reduce")?;
        check_len("reduce", x, dims.outer * dims.len * dims.inner)?;
        let n = dims.outer * dims.inner;
        if n == 0 {
            return Ok(self.output(self.alloc(0, DType::F32, "reduce")?));
        }
        let (code, identity) = (code(op), identity(op));
        // The column kernel also reduces long rows, more slowly: a stand-in until the row kernel
        // is compiled (see `Pipelines::stand_in`).
        // Rows of a multiple of 4 are read as 16-byte elements.
        let quads = dims.len.is_multiple_of(4);
        let row_entry = if quads { "reduce_rows4" } else { "reduce_rows" };
        if dims.inner > 1 || dims.len <= SHORT_ROW || self.pipelines.stand_in(&pipelines::REDUCE, row_entry) {
            // One invocation per output, coalesced across `inner`; with few outputs the reduced
            // axis is split into chunks (partials reduced by a second pass) so the GPU fills up.
            let (chunks, chunk_len) = column_chunks(dims.len, n);
            let target = self.alloc(n * chunks, DType::F32, "reduce")?;
            let params = ReduceParams {
                outer: dims.outer as u32,
                len: dims.len as u32,
                inner: dims.inner as u32,
                op: code,
                identity,
                chunks: chunks as u32,
                chunk_len: chunk_len as u32,
                nan: f32::NAN,
            };
            let groups = self.groups_for(n * chunks, "reduce")?;
            self.run(&pipelines::REDUCE, "reduce_cols", &[R, W], &params, &[bind(x), bind(&target)], groups)?;
            if chunks == 1 {
                return Ok(self.output(target));
            }
            let partial = ReduceDims { outer: dims.outer, len: chunks, inner: dims.inner };
            return self.reduce_kernel(op, &self.output(target), partial);
        }
        // Few long rows: split each into chunks so the whole GPU works, then reduce the partials.
        let chunks = SPREAD_GROUPS.div_ceil(dims.outer).clamp(1, dims.len.div_ceil(MIN_CHUNK));
        let mut chunk_len = dims.len.div_ceil(chunks);
        if quads {
            chunk_len = chunk_len.next_multiple_of(4);
        }
        let chunks = dims.len.div_ceil(chunk_len);
        let rows = dims.outer * chunks;
        let target = self.alloc(rows, DType::F32, "reduce")?;
        let params = ReduceParams {
            outer: rows as u32,
            len: dims.len as u32,
            inner: 1,
            op: code,
            identity,
            chunks: chunks as u32,
            chunk_len: chunk_len as u32,
            nan: f32::NAN,
        };
        let groups = self.groups_rows(rows);
        self.run(&pipelines::REDUCE, row_entry, &[R, W], &params, &[bind(x), bind(&target)], groups)?;
        if chunks == 1 {
            return Ok(self.output(target));
        }
        self.reduce_kernel(op, &self.output(target), ReduceDims { outer: dims.outer, len: chunks, inner: 1 })
    }

    /// [`Backend::sum_squares`](crate::backend::Backend::sum_squares): one `sum_squares` dispatch
    /// per storage writes its workgroups' partials into one buffer, then one reduction sums them.
    pub(super) fn sum_squares_kernel(&self, tensors: &[(&Storage, usize)]) -> Result<Storage> {
        const OP: &str = "sum_squares";
        let mut parts = Vec::with_capacity(tensors.len());
        for &(storage, len) in tensors {
            let x = self.gpu(storage, DType::F32, OP)?;
            check_len(OP, x, len)?;
            if len > SQUARES_MAX_LEN {
                return Err(Error::invalid(OP, format!("{len} elements exceed the kernel's 2^31 - 1")));
            }
            parts.push((x, len, len.div_ceil(SQUARES_PER_GROUP).min(SQUARES_MAX_GROUPS)));
        }
        let total: usize = parts.iter().map(|&(_, _, groups)| groups).sum();
        if total == 0 {
            return Ok(self.output(self.zeroed(1, DType::F32, OP)?));
        }
        let partials = self.alloc(total, DType::F32, OP)?;
        let mut first = 0;
        for (x, len, groups) in parts.into_iter().filter(|&(_, _, groups)| groups > 0) {
            let params = ReduceParams {
                outer: first as u32,
                len: len as u32,
                inner: 1,
                op: code(ReduceOp::Sum),
                identity: 0.0,
                chunks: groups as u32,
                chunk_len: 0,
                nan: f32::NAN,
            };
            let buffers = [bind(x), bind(&partials)];
            self.run(&pipelines::REDUCE, "sum_squares", &[R, W], &params, &buffers, [groups as u32, 1, 1])?;
            first += groups;
        }
        self.reduce_kernel(ReduceOp::Sum, &self.output(partials), ReduceDims { outer: 1, len: total, inner: 1 })
    }

    pub(super) fn argmax_kernel(&self, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "argmax")?;
        check_len("argmax", x, dims.outer * dims.len * dims.inner)?;
        let n = dims.outer * dims.inner;
        let out = self.alloc(n, DType::U32, "argmax")?;
        out.set_bound(Some(dims.len.saturating_sub(1) as u32));
        let params = ArgmaxParams {
            outer: dims.outer as u32,
            len: dims.len as u32,
            inner: dims.inner as u32,
            neg_inf: f32::NEG_INFINITY,
        };
        let groups = self.groups_for(n, "argmax")?;
        self.run(&pipelines::ARGMAX, "argmax", &[R, W], &params, &[bind(x), bind(&out)], groups)?;
        Ok(self.output(out))
    }
}

#[cfg(test)]
mod tests {
    use super::{code, reduce_constants, REDUCE_OPS};

    #[test]
    fn reduce_codes_are_their_positions() {
        for (k, &op) in REDUCE_OPS.iter().enumerate() {
            assert_eq!(code(op) as usize, k);
        }
        assert_eq!(reduce_constants(), "const OP_SUM: u32 = 0u;\nconst OP_MAX: u32 = 1u;\nconst OP_MIN: u32 = 2u;\n");
    }
}
