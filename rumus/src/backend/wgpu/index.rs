//! The kernels of `index.wgsl`: index_select and gather (forward) and their deterministic
//! adjoints index_add and scatter_add. Forward kernels read `[outer, len, inner]` and write
//! `[outer, count, inner]`; the adjoints read the latter and write the former. Every one checks
//! its indices against `len` (see `index_check.rs`).

use super::index_check::read_word;
use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, GatherArgs, IndexArgs, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

/// Most workgroups of `index_links`, which split the index values between them; each reads
/// every index, so more would only add reads.
const LINK_GROUPS: usize = 16;

/// The largest output (`outer · len · inner` elements) whose index_add scans every index per
/// element (`index_add_scan`) instead of threading lists first: `index_links` walks the indices
/// one after another, the scan costs each output element a pass over the indices (a GPT's
/// 16,384 tokens over an 80-row table on an H100: 1.63 ms scanned against 3.07 ms with lists,
/// docs/BENCHMARKS.md runs AF and AG; the bound itself is an estimate, not measured).
const SCAN_OUTPUT: usize = 1 << 18;

/// index_add runs `index_add_rows` (a workgroup per output row and block of 256 columns, each
/// reading every index once, 256 a step) where its workgroups times steps are at most this:
/// about 500 steps per SM of an H100, against `index_links`' serial walk over the indices.
const ROWS_TILE_STEPS: usize = 1 << 16;

/// Every entry point of `index.wgsl` binds source, indices, output, flag and links.
const SIGNATURE: [Access; 5] = [R, R, W, W, W];

kernel_params! {
    /// `n` invocations over a source `[outer, len, inner]` and a selection `[outer, count, inner]`.
    struct IndexParams {
        n: u32,
        outer: u32,
        len: u32,
        inner: u32,
        count: u32,
    } pad 3
}

impl IndexParams {
    fn of(n: usize, [outer, len, inner, count]: [usize; 4]) -> IndexParams {
        let [n, outer, len, inner, count] = [n, outer, len, inner, count].map(|v| v as u32);
        IndexParams { n, outer, len, inner, count, _pad: [0; 3] }
    }
}

impl WgpuBackend {
    /// index_select (1-D indices of `count`) or gather (indices shaped like the output).
    pub(super) fn index_forward(
        &self,
        entry: &'static str,
        op: &'static str,
        x: &Storage,
        idx: &Storage,
        dims: [usize; 4],
    ) -> Result<Storage> {
        let [outer, len, inner, count] = dims;
        let picked = outer * count * inner;
        let idx_len = if entry == "gather" { picked } else { count };
        let (s, i) = (self.gpu(x, DType::F32, op)?, self.gpu(idx, DType::U32, op)?);
        check_len(op, s, outer * len * inner)?;
        check_len(op, i, idx_len)?;
        let out = self.alloc(picked, DType::F32, op)?;
        let params = IndexParams::of(picked, dims);
        let groups = self.groups_for(picked, op)?;
        self.checked_indices(op, i, len, || {
            let buffers = [bind(s), bind(i), bind(&out), self.index_flag.binding(), self.unused()];
            self.run(&pipelines::INDEX, entry, &SIGNATURE, &params, &buffers, groups)
        })?;
        Ok(self.output(out))
    }

    /// index_add: the gradient rows summed into each table row in index order: by output rows
    /// (`index_add_rows`) where few workgroups cover them, else for a small output by a scan of
    /// every index per element (`index_add_scan`), else after `index_links` lists the positions
    /// of each index.
    pub(super) fn index_add_kernel(&self, grad: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        let op = "index_select";
        let IndexArgs { outer, len, inner, count } = *args;
        let (g, i) = (self.gpu(grad, DType::F32, op)?, self.gpu(idx, DType::U32, op)?);
        check_len(op, g, outer * count * inner)?;
        check_len(op, i, count)?;
        let n = outer * len * inner;
        let out = self.alloc(n, DType::F32, op)?;
        let params = IndexParams::of(n, [outer, len, inner, count]);
        // The paths of one dispatch without lists.
        let single = |entry: &'static str, groups: [u32; 3]| {
            self.checked_indices(op, i, len, || {
                let buffers = [bind(g), bind(i), bind(&out), self.index_flag.binding(), self.unused()];
                self.run(&pipelines::INDEX, entry, &SIGNATURE, &params, &buffers, groups)
            })
        };
        let (row_groups, steps) = (outer * len * inner.div_ceil(256), count.div_ceil(256));
        if n > 0 && steps > 0 && row_groups.saturating_mul(steps) <= ROWS_TILE_STEPS {
            single("index_add_rows", self.groups_for(row_groups * 256, op)?)?;
            return Ok(self.output(out));
        }
        let groups = self.groups_for(n, op)?;
        if n > 0 && n <= SCAN_OUTPUT {
            single("index_add_scan", groups)?;
            return Ok(self.output(out));
        }
        let links = self.zeroed(len + count, DType::U32, op)?;
        self.checked_indices(op, i, len, || {
            let buffers = || [bind(g), bind(i), bind(&out), self.index_flag.binding(), bind(&links)];
            if count > 0 {
                let owners = len.div_ceil(256).clamp(1, LINK_GROUPS.min(self.max_groups)) as u32;
                self.run(&pipelines::INDEX, "index_links", &SIGNATURE, &params, &buffers(), [owners, 1, 1])?;
            }
            self.run(&pipelines::INDEX, "index_add", &SIGNATURE, &params, &buffers(), groups)
        })?;
        Ok(self.output(out))
    }

    /// scatter_add: each output element sums its column's gradients whose index is its row.
    pub(super) fn scatter_add_kernel(&self, grad: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        let op = "gather";
        let GatherArgs { outer, len, inner, count } = *args;
        let (g, i) = (self.gpu(grad, DType::F32, op)?, self.gpu(idx, DType::U32, op)?);
        let picked = outer * count * inner;
        check_len(op, g, picked)?;
        check_len(op, i, picked)?;
        let n = outer * len * inner;
        let out = self.alloc(n, DType::F32, op)?;
        let params = IndexParams::of(n, [outer, len, inner, count]);
        if n == 0 && picked > 0 {
            // An empty axis: every index is out of range, and no invocation would report one.
            let index = read_word(self, i.buffer(), 0)?;
            return Err(Error::IndexOutOfRange { op, index: i64::from(index), limit: 0, position: 0 });
        }
        let groups = self.groups_for(n, op)?;
        self.checked_indices(op, i, len, || {
            let buffers = [bind(g), bind(i), bind(&out), self.index_flag.binding(), self.unused()];
            self.run(&pipelines::INDEX, "scatter_add", &SIGNATURE, &params, &buffers, groups)
        })?;
        Ok(self.output(out))
    }
}
