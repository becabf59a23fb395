//! `attention_forward.wgsl`, `attention_backward_dq.wgsl` and `attention_backward_dkdv.wgsl`
//! (with `lib/attention_tiles.wgsl` and `lib/attention_row_tiles.wgsl`; the keys' side also
//! `lib/attention_dout.wgsl`): fused attention, one
//! workgroup per (head, 64 rows), one invocation per row. The kernels read q, k, v and the
//! output's gradient where [`AttentionArgs::input_rows`] and [`AttentionArgs::output_rows`] put
//! them (separate `[batch, t, d]` tensors, or a transformer's packed projection read in place)
//! and write dq, dk and dv into one buffer; every row's extent is checked here first
//! (`check_rows`), since the shaders index without bounds checks.
//!
//! For head dimensions up to 64, where the adapter offers the workgroup memory (about 42 KiB at
//! `d` = 64, see [`blocked_bytes`]), the backward's keys' side runs
//! `attention_backward_dkdv_blocked.wgsl` instead (with `lib/attention_blocks.wgsl`): one
//! workgroup of 256 invocations per (head, 32 keys), the scores of each streamed block of 32
//! queries spread over all invocations and dk, dv split by (key, column). (The queries' side has no blocked kernel: one was slower than the
//! row kernel, which holds only three rows in registers; BENCHMARKS.md.)
//!
//! Each file is compiled in three head-size variants, the head dimension `d` rounded up to
//! `DMAX` = 32, 64 or 128 (the lanes beyond `d` read as zeros), so that every loop over the
//! head dimension has a compile-time bound and an invocation's rows stay in registers. Each
//! variant stages `2048 / DMAX` rows at a time in two tiles of 16 KiB together, within
//! WebGPU's default workgroup memory. A head dimension above 128 has no fused kernel here
//! ([`WgpuBackend::attention_forward_kernel`] returns `None` and the op composes the
//! reference on the device).

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access, Shader};
use super::storage::WgpuStorage;
use super::WgpuBackend;
use crate::backend::{AttentionArgs, AttentionRows, DType, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "scaled_dot_product_attention";

/// Rows (queries or keys) per workgroup: the WGSL `WG`.
const ROWS: usize = 64;

/// The largest head dimension with a fused kernel.
pub(crate) const MAX_HEAD_DIM: usize = 128;

kernel_params! {
    /// `lib/attention_tiles.wgsl`: the sizes of [`AttentionArgs`] (`shift = tk - tq`), `tiles`
    /// workgroups of 64 rows per head and `total` in all, the score scale and the scale times
    /// log2(e) (scores in base 2 for `exp2`), then where the rows of q, k, v and the output lie
    /// ([`AttentionRows`]) and where dq, dk and dv begin in the gradients' buffer.
    struct AttentionParams {
        tq: u32,
        tk: u32,
        d: u32,
        causal: u32,
        shift: u32,
        tiles: u32,
        total: u32,
        scale: f32,
        scale_log2: f32,
        heads: u32,
        q_off: u32,
        q_outer: u32,
        q_head: u32,
        q_row: u32,
        k_off: u32,
        k_outer: u32,
        k_head: u32,
        k_row: u32,
        v_off: u32,
        v_outer: u32,
        v_head: u32,
        v_row: u32,
        o_outer: u32,
        o_head: u32,
        o_row: u32,
        dq_off: u32,
        dk_off: u32,
        dv_off: u32,
    }
}

/// Keys per workgroup (and queries per streamed block) of the blocked dk/dv kernel: the WGSL `BK`.
const BLOCK_ROWS: usize = 32;

/// The workgroup memory of the blocked dk/dv kernel for head dimensions up to `dmax` (at most
/// 64): four blocks of `BK` rows of `dmax / 4 + 1` vec4s, two `BK` x `BK` score blocks and two
/// `BK` rows.
const fn blocked_bytes(dmax: usize) -> usize {
    4 * BLOCK_ROWS * (dmax / 4 + 1) * 16 + 2 * BLOCK_ROWS * BLOCK_ROWS * 4 + 2 * BLOCK_ROWS * 4
}

/// The constants of the variant for head dimensions up to `dmax`.
fn constants(dmax: u32) -> String {
    format!(
        "const DMAX: u32 = {dmax}u;\nconst D4: u32 = {}u;\nconst BT: u32 = {}u;\nconst BK: u32 = {}u;\n",
        dmax / 4,
        2048 / dmax,
        BLOCK_ROWS
    )
}

pub(super) fn constants_32() -> String {
    constants(32)
}

pub(super) fn constants_64() -> String {
    constants(64)
}

pub(super) fn constants_128() -> String {
    constants(128)
}

/// The kernels of one head-size variant.
struct Variant {
    /// The head dimensions it holds, rounded up.
    dmax: usize,
    forward: &'static Shader,
    dq: &'static Shader,
    dkdv: &'static Shader,
    /// The blocked dk/dv kernel, for head dimensions up to 64.
    dkdv_blocked: Option<&'static Shader>,
}

/// The smallest variant that holds head dimension `d`, if any.
fn variant(d: usize) -> Option<Variant> {
    use pipelines::*;
    match d {
        0..=32 => Some(Variant {
            dmax: 32,
            forward: &ATTENTION_FORWARD_32,
            dq: &ATTENTION_DQ_32,
            dkdv: &ATTENTION_DKDV_32,
            dkdv_blocked: Some(&ATTENTION_DKDV_BLOCKED_32),
        }),
        33..=64 => Some(Variant {
            dmax: 64,
            forward: &ATTENTION_FORWARD_64,
            dq: &ATTENTION_DQ_64,
            dkdv: &ATTENTION_DKDV_64,
            dkdv_blocked: Some(&ATTENTION_DKDV_BLOCKED_64),
        }),
        65..=MAX_HEAD_DIM => Some(Variant {
            dmax: MAX_HEAD_DIM,
            forward: &ATTENTION_FORWARD_128,
            dq: &ATTENTION_DQ_128,
            dkdv: &ATTENTION_DKDV_128,
            dkdv_blocked: None,
        }),
        _ => None,
    }
}

/// The dk/dv kernel of `variant` on an adapter with `workgroup_bytes` of workgroup memory, and
/// the keys each workgroup takes: the blocked kernel where it fits, else the unblocked one
/// (which fits WebGPU's default 16 KiB).
fn dkdv_kernel(variant: &Variant, workgroup_bytes: usize) -> (&'static Shader, usize) {
    match variant.dkdv_blocked.filter(|_| workgroup_bytes >= blocked_bytes(variant.dmax)) {
        Some(kernel) => (kernel, BLOCK_ROWS),
        None => (variant.dkdv, ROWS),
    }
}

/// The shader file of the dk/dv backward for head dimension `d` on an adapter with `limits`
/// (`None` above [`MAX_HEAD_DIM`]): the dispatcher's own choice. For the test that every kernel
/// fits WebGPU's default limits or is gated on the adapter's (`tests/house/shaders_validate.rs`).
pub(super) fn dkdv_kernel_under(limits: &::wgpu::Limits, d: usize) -> Option<&'static str> {
    let variant = variant(d)?;
    Some(dkdv_kernel(&variant, limits.max_compute_workgroup_storage_size as usize).0.name)
}

/// Sizes and indices of the kernels stay below this (their loops step past their bounds by at
/// most a tile, which must not wrap a u32).
const INDEX_LIMIT: usize = 1 << 31;

/// `v` as a u32 kernel size, or an error naming what it is.
fn word(what: &str, v: usize) -> Result<u32> {
    if v >= INDEX_LIMIT {
        return Err(Error::invalid(OP, format!("{what} {v} exceeds the kernels' indices (below 2^31)")));
    }
    Ok(v as u32)
}

/// The last element of a tensor laid out as `rows` (`t` rows of `d` of each of `batch` heads,
/// `heads` per sequence), plus one: the elements its buffer must hold. `None` on overflow.
fn extent(rows: &AttentionRows, a: &AttentionArgs, t: usize) -> Option<usize> {
    if a.batch == 0 || t == 0 || a.d == 0 {
        return Some(0);
    }
    let heads = a.heads();
    let last_sequence = (a.batch - 1) / heads;
    let last_head = heads.min(a.batch) - 1;
    rows.offset
        .checked_add(last_sequence.checked_mul(rows.outer)?)?
        .checked_add(last_head.checked_mul(rows.head)?)?
        .checked_add((t - 1).checked_mul(rows.row)?)?
        .checked_add(a.d)
}

/// Checks that `buffer` holds every row of a tensor laid out as `rows`: the kernels index it
/// without runtime bounds checks.
fn check_rows(what: &str, buffer: &WgpuStorage, rows: &AttentionRows, a: &AttentionArgs, t: usize) -> Result<()> {
    match extent(rows, a, t) {
        Some(end) if end <= buffer.len() => Ok(()),
        _ => Err(Error::invalid(
            OP,
            format!("{what}'s rows ({rows:?}, {t} per head) reach past its {} elements", buffer.len()),
        )),
    }
}

/// The parameters for workgroups of `per_group` rows over `rows` rows (queries or keys) of each
/// head.
fn params(a: &AttentionArgs, rows: usize, per_group: usize) -> Result<AttentionParams> {
    a.check(OP)?;
    // Every index the kernels form stays below the largest buffer, the gradients':
    // batch · (tq + 2·tk) · d elements.
    word("element count", a.grads_len().max(a.batch.saturating_mul(a.tq.max(a.tk)).saturating_mul(a.d.max(4))))?;
    let tiles = rows.div_ceil(per_group);
    let [q, k, v] = a.input_rows();
    let o = a.output_rows();
    let [dq, dk, dv] = a.grad_offsets();
    Ok(AttentionParams {
        tq: word("tq", a.tq)?,
        tk: word("tk", a.tk)?,
        d: word("d", a.d)?,
        causal: a.causal as u32,
        shift: word("tk - tq", a.tk.saturating_sub(a.tq))?,
        tiles: word("tiles", tiles)?,
        total: word("workgroups", a.batch.saturating_mul(tiles))?,
        scale: a.scale,
        scale_log2: a.scale * std::f32::consts::LOG2_E,
        heads: word("heads", a.heads())?,
        q_off: word("q offset", q.offset)?,
        q_outer: word("q stride", q.outer)?,
        q_head: word("q stride", q.head)?,
        q_row: word("q stride", q.row)?,
        k_off: word("k offset", k.offset)?,
        k_outer: word("k stride", k.outer)?,
        k_head: word("k stride", k.head)?,
        k_row: word("k stride", k.row)?,
        v_off: word("v offset", v.offset)?,
        v_outer: word("v stride", v.outer)?,
        v_head: word("v stride", v.head)?,
        v_row: word("v stride", v.row)?,
        o_outer: word("output stride", o.outer)?,
        o_head: word("output stride", o.head)?,
        o_row: word("output stride", o.row)?,
        dq_off: word("dq offset", dq)?,
        dk_off: word("dk offset", dk)?,
        dv_off: word("dv offset", dv)?,
    })
}

impl WgpuBackend {
    /// The adapter's workgroup memory, in bytes.
    fn workgroup_bytes(&self) -> usize {
        self.ctx.limits.max_compute_workgroup_storage_size as usize
    }

    /// The fused forward, or `None` for head dimensions above [`MAX_HEAD_DIM`].
    pub(super) fn attention_forward_kernel(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        a: &AttentionArgs,
    ) -> Result<Option<(Storage, Storage)>> {
        let Some(variant) = variant(a.d) else { return Ok(None) };
        let p = params(a, a.tq, ROWS)?;
        let (q, k, v) = (self.gpu(q, DType::F32, OP)?, self.gpu(k, DType::F32, OP)?, self.gpu(v, DType::F32, OP)?);
        check_inputs(q, k, v, a)?;
        let out = self.alloc(a.output_len(), DType::F32, OP)?;
        let lse = self.alloc(a.batch * a.tq, DType::F32, OP)?;
        check_rows("the output", &out, &a.output_rows(), a, a.tq)?;
        if p.total > 0 {
            let groups = self.groups_for(p.total as usize * super::launch::WG, OP)?;
            let buffers = [bind(q), bind(k), bind(v), bind(&out), bind(&lse)];
            self.run(variant.forward, "attention_forward", &[R, R, R, W, W], &p, &buffers, groups)?;
        }
        Ok(Some((self.output(out), self.output(lse))))
    }

    /// The fused backward: `dq` (and each query's `delta = dout·out`), then `dk` and `dv`, all
    /// into one buffer (see [`AttentionArgs::grad_offsets`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention_backward_kernel(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        out: &Storage,
        lse: &Storage,
        dout: &Storage,
        a: &AttentionArgs,
    ) -> Result<Storage> {
        let variant =
            variant(a.d).ok_or_else(|| Error::invalid(OP, format!("no fused backward for head dimension {}", a.d)))?;
        let (dkdv_kernel, per_group) = dkdv_kernel(&variant, self.workgroup_bytes());
        let (pq, pk) = (params(a, a.tq, ROWS)?, params(a, a.tk, per_group)?);
        let [q, k, v, out, lse, dout] = [q, k, v, out, lse, dout].map(|s| self.gpu(s, DType::F32, OP));
        let (q, k, v, out, lse, dout) = (q?, k?, v?, out?, lse?, dout?);
        check_inputs(q, k, v, a)?;
        check_rows("the output", out, &a.output_rows(), a, a.tq)?;
        check_rows("the output's gradient", dout, &a.output_rows(), a, a.tq)?;
        check_len(OP, lse, a.batch * a.tq)?;
        let grads = self.alloc(a.grads_len(), DType::F32, OP)?;
        let delta = self.alloc(a.batch * a.tq, DType::F32, OP)?;
        let parts = ["dq", "dk", "dv"].into_iter().zip(a.input_rows()).zip(a.grad_offsets()).zip([a.tq, a.tk, a.tk]);
        for (((what, rows), at), t) in parts {
            check_rows(what, &grads, &AttentionRows { offset: at, ..rows }, a, t)?;
        }
        if pq.total > 0 && pk.total > 0 {
            let groups = self.groups_for(pq.total as usize * super::launch::WG, OP)?;
            let buffers = [bind(q), bind(k), bind(v), bind(dout), bind(lse), bind(out), bind(&grads), bind(&delta)];
            self.run(variant.dq, "attention_backward_dq", &[R, R, R, R, R, R, W, W], &pq, &buffers, groups)?;
            let groups = self.groups_for(pk.total as usize * super::launch::WG, OP)?;
            let buffers = [bind(q), bind(k), bind(v), bind(dout), bind(lse), bind(&delta), bind(&grads)];
            self.run(dkdv_kernel, "attention_backward_dkdv", &[R, R, R, R, R, R, W], &pk, &buffers, groups)?;
        }
        Ok(self.output(grads))
    }
}

/// Checks that q, k and v hold every row their layout gives them (one buffer when packed).
fn check_inputs(q: &WgpuStorage, k: &WgpuStorage, v: &WgpuStorage, a: &AttentionArgs) -> Result<()> {
    let [qr, kr, vr] = a.input_rows();
    check_rows("q", q, &qr, a, a.tq)?;
    check_rows("k", k, &kr, a, a.tk)?;
    check_rows("v", v, &vr, a, a.tk)
}
