//! The CPU backend: `gemm` for matmul, rayon across cores for everything large.

mod attention;
mod batch_norm;
mod buffer_pool;
mod conv;
mod conv2d;
mod conv2d_direct;
mod copy;
mod denormals;
mod elementwise;
mod erf;
mod index;
mod isa;
mod layer_norm;
mod matmul;
mod max_pool_2x2;
mod optim;
mod parallel;
mod random;
mod recurrent;
mod reduce;
mod rms_norm;
mod softmax;
mod storage;
mod warp;

pub(crate) use buffer_pool::filled_with as try_filled;
pub use buffer_pool::pooled_bytes;
pub(crate) use storage::{f32_storage, host, u32_storage};
use storage::{lock_all, Access, Locked};
pub use storage::{CpuData, CpuStorage};

use crate::backend::*;
use crate::{Error, Layout, Result};

/// Kernels that run on the host.
#[derive(Debug, Default)]
pub struct CpuBackend;

/// Borrows the f32 elements of one CPU storage for the duration of `$body` (one lock only: a
/// kernel with several operands locks them with [`read_f32s`]).
macro_rules! read_f32 {
    ($storage:expr, $op:expr, |$name:ident| $body:expr) => {{
        denormals::ensure_flushed();
        let guard = host($storage, $op)?.read();
        let $name = guard.as_f32($op)?;
        $body
    }};
}

macro_rules! read_u32 {
    ($storage:expr, $op:expr, |$name:ident| $body:expr) => {{
        let guard = host($storage, $op)?.read();
        let $name = guard.as_u32($op)?;
        $body
    }};
}

/// Read locks on several operands, taken together in the global lock order.
fn read_all<'a>(op: &'static str, storages: &[&'a Storage]) -> Result<Locked<'a>> {
    denormals::ensure_flushed();
    let requests: Vec<(&Storage, Access)> = storages.iter().map(|&s| (s, Access::Read)).collect();
    lock_all(op, &requests)
}

/// `Ok` when every element `layout` addresses lies inside `len` elements.
fn check_fits(op: &'static str, layout: &Layout, len: usize) -> Result<()> {
    let fits = match layout.max_index() {
        Some(last) => last < len,
        None => layout.numel() == 0,
    };
    if fits {
        return Ok(());
    }
    Err(Error::shape(op, format!("layout {layout:?} addresses elements beyond the storage's {len}")))
}

/// The `len` leading elements of `x`, or an error naming `op`.
fn prefix<'x>(op: &'static str, x: &'x [f32], len: usize) -> Result<&'x [f32]> {
    x.get(..len).ok_or_else(|| Error::shape(op, format!("{len} elements requested of a storage of {}", x.len())))
}

/// `rows · cols` checked.
fn area(op: &'static str, rows: usize, cols: usize) -> Result<usize> {
    crate::layout::checked_mul(op, "rows x cols", rows, cols)
}

/// Gathers `layout`'s elements of `x` row-major into a fresh buffer.
fn gather_view<T: Copy + Send + Sync + bytemuck::Zeroable>(
    op: &'static str,
    x: &[T],
    layout: &Layout,
) -> Result<Vec<T>> {
    check_fits(op, layout, x.len())?;
    let mut out = buffer_pool::zeroed(op, layout.numel())?;
    copy::copy_strided(x, layout, &mut out, &Layout::contiguous(layout.shape()));
    Ok(out)
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn from_f32(&self, data: &[f32]) -> Result<Storage> {
        let mut values = buffer_pool::take("from_vec", data.len())?;
        values.copy_from_slice(data);
        Ok(f32_storage(values))
    }

    fn from_u32(&self, data: &[u32]) -> Result<Storage> {
        Ok(u32_storage(buffer_pool::copied("from_indices", data)?))
    }

    fn to_f32(&self, src: &Storage, layout: &Layout) -> Result<Vec<f32>> {
        read_f32!(src, "to_vec", |x| {
            check_fits("to_vec", layout, x.len())?;
            let mut out = buffer_pool::take("to_vec", layout.numel())?;
            copy::copy_strided(x, layout, &mut out, &Layout::contiguous(layout.shape()));
            Ok(out)
        })
    }

    fn gather_f32(&self, src: &Storage, layout: &Layout) -> Result<Storage> {
        // `to_f32` writes every element of a pooled buffer: no zero fill first.
        Ok(f32_storage(self.to_f32(src, layout)?))
    }

    fn to_u32(&self, src: &Storage, layout: &Layout) -> Result<Vec<u32>> {
        read_u32!(src, "to_vec", |x| gather_view("to_vec", x, layout))
    }

    fn full(&self, len: usize, value: f32) -> Result<Storage> {
        Ok(f32_storage(buffer_pool::filled("full", len, value)?))
    }

    fn copy_strided(&self, src: &Storage, src_layout: &Layout, dst: &Storage, dst_layout: &Layout) -> Result<()> {
        const OP: &str = "copy";
        if src_layout.shape() != dst_layout.shape() {
            return Err(Error::shape(OP, format!("source {src_layout:?} and destination {dst_layout:?} differ")));
        }
        if src.same_memory(dst) {
            // Source and destination may overlap: copy the source out first.
            let staged = match src.dtype() {
                DType::F32 => f32_storage(self.to_f32(src, src_layout)?),
                DType::U32 => u32_storage(self.to_u32(src, src_layout)?),
            };
            return self.copy_strided(&staged, &Layout::contiguous(src_layout.shape()), dst, dst_layout);
        }
        let mut locked = lock_all(OP, &[(src, Access::Read), (dst, Access::Write)])?;
        let mut slots = locked.split(OP)?.into_iter();
        let (Some(s), Some(d)) = (slots.next(), slots.next()) else {
            return Err(Error::invalid(OP, "two operands expected"));
        };
        match (s.read(OP)?, d.write(OP)?) {
            (CpuData::F32(s), CpuData::F32(d)) => copy_checked(s, src_layout, d, dst_layout),
            (CpuData::U32(s), CpuData::U32(d)) => copy_checked(s, src_layout, d, dst_layout),
            (s, d) => {
                let name = |x: &CpuData| if matches!(x, CpuData::F32(_)) { "f32" } else { "u32" };
                Err(Error::DType { op: OP, expected: name(d), got: name(s) })
            }
        }
    }

    fn random(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage> {
        kind.check_len(len)?;
        let mut values = buffer_pool::take("random", len)?;
        random::fill(kind, seed, &mut values);
        Ok(f32_storage(values))
    }

    fn unary(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage> {
        read_f32!(x, op.name(), |x| Ok(f32_storage(elementwise::unary(op, prefix(op.name(), x, len)?)?)))
    }

    fn unary_backward(&self, op: UnaryOp, x: &Storage, y: &Storage, grad: &Storage, len: usize) -> Result<Storage> {
        let name = op.name();
        let locked = read_all(name, &[x, y, grad])?;
        let (x, y) = (prefix(name, locked.f32(0, name)?, len)?, prefix(name, locked.f32(1, name)?, len)?);
        let g = prefix(name, locked.f32(2, name)?, len)?;
        Ok(f32_storage(elementwise::unary_backward(op, x, y, g)?))
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage> {
        let name = op.name();
        let locked = read_all(name, &[lhs, rhs])?;
        let (l, r) = (locked.f32(0, name)?, locked.f32(1, name)?);
        if lhs_layout.shape() != rhs_layout.shape() {
            return Err(Error::shape(name, format!("layouts {lhs_layout:?} and {rhs_layout:?} differ in shape")));
        }
        check_fits(name, lhs_layout, l.len())?;
        check_fits(name, rhs_layout, r.len())?;
        Ok(f32_storage(elementwise::binary(op, l, lhs_layout, r, rhs_layout)?))
    }

    fn reduce(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        read_f32!(x, "reduce", |x| {
            check_dims("reduce", &[dims.outer, dims.len, dims.inner], x.len())?;
            Ok(f32_storage(reduce::reduce(op, x, dims)?))
        })
    }

    fn argmax(&self, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        read_f32!(x, "argmax", |x| {
            check_dims("argmax", &[dims.outer, dims.len, dims.inner], x.len())?;
            Ok(u32_storage(reduce::argmax(x, dims)?))
        })
    }

    fn matmul(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        let locked = read_all("matmul", &[lhs, rhs])?;
        Ok(f32_storage(matmul::matmul(locked.f32(0, "matmul")?, locked.f32(1, "matmul")?, args)?))
    }

    fn softmax(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        read_f32!(x, "softmax", |x| {
            Ok(f32_storage(softmax::softmax(prefix("softmax", x, area("softmax", rows, cols)?)?, cols, log)?))
        })
    }

    fn softmax_backward(&self, y: &Storage, grad: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        const OP: &str = "softmax_backward";
        let len = area(OP, rows, cols)?;
        let locked = read_all(OP, &[y, grad])?;
        let (y, g) = (prefix(OP, locked.f32(0, OP)?, len)?, prefix(OP, locked.f32(1, OP)?, len)?);
        Ok(f32_storage(softmax::softmax_backward(y, g, cols, log)?))
    }

    fn cross_entropy(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        const OP: &str = "cross_entropy";
        let mut inputs = vec![logits, targets];
        inputs.extend(weights);
        let locked = read_all(OP, &inputs)?;
        let (x, t) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        let w = class_weights(OP, &locked, weights.is_some().then_some(2), args)?;
        check_dims(OP, &[args.rows, args.classes], x.len())?;
        check_dims(OP, &[args.rows], t.len())?;
        check_targets(OP, &t[..args.rows], args)?;
        Ok(f32_storage(softmax::cross_entropy(x, t, w, args)?))
    }

    fn cross_entropy_backward(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        const OP: &str = "cross_entropy";
        let mut inputs = vec![logits, targets, grad_rows];
        inputs.extend(weights);
        let locked = read_all(OP, &inputs)?;
        let (x, t, g) = (locked.f32(0, OP)?, locked.u32(1, OP)?, locked.f32(2, OP)?);
        let w = class_weights(OP, &locked, weights.is_some().then_some(3), args)?;
        check_dims(OP, &[args.rows, args.classes], x.len())?;
        check_dims(OP, &[args.rows], t.len().min(g.len()))?;
        check_targets(OP, &t[..args.rows], args)?;
        Ok(f32_storage(softmax::cross_entropy_backward(x, t, w, g, args)?))
    }

    fn attention_forward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        args: &AttentionArgs,
    ) -> Result<Option<(Storage, Storage)>> {
        const OP: &str = "scaled_dot_product_attention";
        args.check(OP)?;
        let locked = read_all(OP, &[q, k, v])?;
        let (q, k, v) = (locked.f32(0, OP)?, locked.f32(1, OP)?, locked.f32(2, OP)?);
        let [q_len, k_len, v_len] = args.input_lens();
        check_dims(OP, &[q_len], q.len())?;
        check_dims(OP, &[k_len], k.len())?;
        check_dims(OP, &[v_len], v.len())?;
        let AttentionLayout::Packed { heads } = args.layout else {
            let (out, lse) = attention::attention_forward(q, k, v, args)?;
            return Ok(Some((f32_storage(out), f32_storage(lse))));
        };
        // The kernels below take [batch, t, d] heads: gather them out of the projection.
        let separate = AttentionArgs { layout: AttentionLayout::Separate, ..*args };
        let (b, t, d) = (args.batch, args.tq, args.d);
        let [qr, kr, vr] = args.input_rows();
        let (qs, ks, vs) = (
            attention::gather_rows(q, qr, heads, b, t, d)?,
            attention::gather_rows(k, kr, heads, b, t, d)?,
            attention::gather_rows(v, vr, heads, b, t, d)?,
        );
        let (out, lse) = attention::attention_forward(&qs, &ks, &vs, &separate)?;
        let mut merged = buffer_pool::take(OP, args.output_len())?;
        let o = args.output_rows();
        attention::scatter_rows(&[(&out, o)], &mut merged, o.outer, heads, t, d);
        Ok(Some((f32_storage(merged), f32_storage(lse))))
    }

    fn attention_backward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        out: &Storage,
        lse: &Storage,
        dout: &Storage,
        args: &AttentionArgs,
    ) -> Result<Storage> {
        const OP: &str = "scaled_dot_product_attention";
        args.check(OP)?;
        let locked = read_all(OP, &[q, k, v, out, lse, dout])?;
        let (q, k, v) = (locked.f32(0, OP)?, locked.f32(1, OP)?, locked.f32(2, OP)?);
        let (out, lse, dout) = (locked.f32(3, OP)?, locked.f32(4, OP)?, locked.f32(5, OP)?);
        let [q_len, k_len, v_len] = args.input_lens();
        check_dims(OP, &[q_len], q.len())?;
        check_dims(OP, &[k_len], k.len())?;
        check_dims(OP, &[v_len], v.len())?;
        check_dims(OP, &[args.output_len()], out.len().min(dout.len()))?;
        check_dims(OP, &[args.batch, args.tq], lse.len())?;
        let AttentionLayout::Packed { heads } = args.layout else {
            return Ok(f32_storage(attention::attention_backward(q, k, v, out, lse, dout, args)?));
        };
        let separate = AttentionArgs { layout: AttentionLayout::Separate, ..*args };
        let (b, t, d) = (args.batch, args.tq, args.d);
        let [qr, kr, vr] = args.input_rows();
        let o = args.output_rows();
        let gather = |src: &[f32], rows| attention::gather_rows(src, rows, heads, b, t, d);
        let (qs, ks, vs, os, dos) = (gather(q, qr)?, gather(k, kr)?, gather(v, vr)?, gather(out, o)?, gather(dout, o)?);
        let grads = attention::attention_backward(&qs, &ks, &vs, &os, lse, &dos, &separate)?;
        // [dq | dk | dv] back into the projection's layout.
        let mut packed = buffer_pool::take(OP, args.grads_len())?;
        let (dq, dkv) = grads.split_at(b * t * d);
        let (dk, dv) = dkv.split_at(b * t * d);
        attention::scatter_rows(&[(dq, qr), (dk, kr), (dv, vr)], &mut packed, qr.outer, heads, t, d);
        Ok(f32_storage(packed))
    }

    fn fuses_batch_norm(&self) -> bool {
        true
    }

    fn batch_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        stats: Option<(&Storage, &Storage)>,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        const OP: &str = "batch_norm";
        args.check(OP)?;
        let stats = if args.batch_stats { None } else { stats };
        if !args.batch_stats && stats.is_none() {
            return Err(Error::invalid(OP, "normalising without batch statistics needs the running ones"));
        }
        let (mean, var) = stats.unzip();
        let storages: Vec<&Storage> = [Some(x), weight, bias, mean, var].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let len = crate::layout::checked_numel(OP, &[args.batch, args.channels, args.inner])?;
        let xs = prefix(OP, locked.f32(0, OP)?, len)?;
        let mut next = 1;
        let mut feature = |given: bool| -> Result<Option<&[f32]>> {
            if !given {
                return Ok(None);
            }
            next += 1;
            Ok(Some(prefix(OP, locked.f32(next - 1, OP)?, args.channels)?))
        };
        let (w, b) = (feature(weight.is_some())?, feature(bias.is_some())?);
        let (m, v) = (feature(mean.is_some())?, feature(var.is_some())?);
        let (y, mean, var) = batch_norm::batch_norm(xs, w, b, m.zip(v), args)?;
        Ok((f32_storage(y), f32_storage(mean), f32_storage(var)))
    }

    fn batch_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        mean: &Storage,
        var: &Storage,
        dy: &Storage,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        const OP: &str = "batch_norm";
        args.check(OP)?;
        // The bias only shapes the ReLU's mask.
        let bias = if args.relu { bias } else { None };
        let storages: Vec<&Storage> =
            [Some(x), Some(mean), Some(var), Some(dy), weight, bias].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let len = crate::layout::checked_numel(OP, &[args.batch, args.channels, args.inner])?;
        let (x, dy) = (prefix(OP, locked.f32(0, OP)?, len)?, prefix(OP, locked.f32(3, OP)?, len)?);
        let (mean, var) =
            (prefix(OP, locked.f32(1, OP)?, args.channels)?, prefix(OP, locked.f32(2, OP)?, args.channels)?);
        let w = weight.is_some().then(|| prefix(OP, locked.f32(4, OP)?, args.channels)).transpose()?;
        let at = 4 + weight.is_some() as usize;
        let b = bias.is_some().then(|| prefix(OP, locked.f32(at, OP)?, args.channels)).transpose()?;
        let (dx, dw, db) = batch_norm::batch_norm_backward(x, w, b, mean, var, dy, args)?;
        Ok((f32_storage(dx), f32_storage(dw), f32_storage(db)))
    }

    fn batch_norm_update_running(
        &self,
        running_mean: &Storage,
        running_var: &Storage,
        mean: &Storage,
        var: &Storage,
        momentum: f32,
        args: &BatchNormArgs,
    ) -> Result<()> {
        const OP: &str = "batch_norm";
        args.check(OP)?;
        let requests =
            [(running_mean, Access::Write), (running_var, Access::Write), (mean, Access::Read), (var, Access::Read)];
        let mut locked = lock_all(OP, &requests)?;
        let mut slots = locked.split(OP)?.into_iter();
        let (Some(rm), Some(rv), Some(m), Some(v)) = (slots.next(), slots.next(), slots.next(), slots.next()) else {
            return Err(Error::invalid(OP, "four operands expected"));
        };
        let c = args.channels;
        let short = || Error::shape(OP, format!("running statistics of {c} channels expected"));
        let rm = rm.write(OP)?.as_f32_mut(OP)?.get_mut(..c).ok_or_else(short)?;
        let rv = rv.write(OP)?.as_f32_mut(OP)?.get_mut(..c).ok_or_else(short)?;
        let (m, v) = (prefix(OP, m.read(OP)?.as_f32(OP)?, c)?, prefix(OP, v.read(OP)?.as_f32(OP)?, c)?);
        batch_norm::update_running(rm, rv, m, v, momentum, args);
        Ok(())
    }

    fn layer_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        const OP: &str = "layer_norm";
        args.check(OP)?;
        let storages: Vec<&Storage> = [Some(x), weight, bias].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        check_dims(OP, &[args.rows, args.cols], locked.f32(0, OP)?.len())?;
        let feature = |given: bool, i: usize| given.then(|| prefix(OP, locked.f32(i, OP)?, args.cols)).transpose();
        let (w, b) = (feature(weight.is_some(), 1)?, feature(bias.is_some(), 1 + weight.is_some() as usize)?);
        let (y, mean, rstd) = layer_norm::layer_norm(locked.f32(0, OP)?, w, b, args)?;
        Ok((f32_storage(y), f32_storage(mean), f32_storage(rstd)))
    }

    fn layer_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage> {
        const OP: &str = "layer_norm";
        args.check(OP)?;
        let storages: Vec<&Storage> =
            [Some(x), Some(mean), Some(rstd), Some(dy), weight].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let len = area(OP, args.rows, args.cols)?;
        let (x, dy) = (prefix(OP, locked.f32(0, OP)?, len)?, prefix(OP, locked.f32(3, OP)?, len)?);
        let (mean, rstd) = (prefix(OP, locked.f32(1, OP)?, args.rows)?, prefix(OP, locked.f32(2, OP)?, args.rows)?);
        let w = weight.is_some().then(|| prefix(OP, locked.f32(4, OP)?, args.cols)).transpose()?;
        Ok(f32_storage(layer_norm::layer_norm_backward(x, w, mean, rstd, dy, args)?))
    }

    fn layer_norm_param_grads(
        &self,
        x: &Storage,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage)> {
        const OP: &str = "layer_norm";
        args.check(OP)?;
        let locked = read_all(OP, &[x, mean, rstd, dy])?;
        let len = area(OP, args.rows, args.cols)?;
        let (x, dy) = (prefix(OP, locked.f32(0, OP)?, len)?, prefix(OP, locked.f32(3, OP)?, len)?);
        let (mean, rstd) = (prefix(OP, locked.f32(1, OP)?, args.rows)?, prefix(OP, locked.f32(2, OP)?, args.rows)?);
        let (dw, db) = layer_norm::param_grads(x, mean, rstd, dy, args)?;
        Ok((f32_storage(dw), f32_storage(db)))
    }

    fn rms_norm(&self, x: &Storage, weight: Option<&Storage>, args: &LayerNormArgs) -> Result<(Storage, Storage)> {
        const OP: &str = "rms_norm";
        args.check(OP)?;
        let storages: Vec<&Storage> = [Some(x), weight].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        check_dims(OP, &[args.rows, args.cols], locked.f32(0, OP)?.len())?;
        let w = weight.is_some().then(|| prefix(OP, locked.f32(1, OP)?, args.cols)).transpose()?;
        let (y, rstd) = rms_norm::rms_norm(locked.f32(0, OP)?, w, args)?;
        Ok((f32_storage(y), f32_storage(rstd)))
    }

    fn rms_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage> {
        const OP: &str = "rms_norm";
        args.check(OP)?;
        let storages: Vec<&Storage> = [Some(x), Some(rstd), Some(dy), weight].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let len = area(OP, args.rows, args.cols)?;
        let (x, dy) = (prefix(OP, locked.f32(0, OP)?, len)?, prefix(OP, locked.f32(2, OP)?, len)?);
        let rstd = prefix(OP, locked.f32(1, OP)?, args.rows)?;
        let w = weight.is_some().then(|| prefix(OP, locked.f32(3, OP)?, args.cols)).transpose()?;
        Ok(f32_storage(rms_norm::rms_norm_backward(x, w, rstd, dy, args)?))
    }

    fn recurrent_forward(
        &self,
        xproj: &Storage,
        w_hh_t: &Storage,
        b_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Storage)> {
        const OP: &str = "recurrent";
        args.check(OP)?;
        let lstm = args.cell == RecurrentCell::Lstm;
        if lstm != c0.is_some() {
            return Err(Error::invalid(OP, "an LSTM takes c0, a GRU does not"));
        }
        let storages: Vec<&Storage> =
            [Some(xproj), Some(w_hh_t), Some(b_hh), Some(h0), c0].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let (h, width) = (args.hidden, args.width());
        let state = args.batch * h;
        let inputs = recurrent::ForwardInputs {
            xproj: prefix(OP, locked.f32(0, OP)?, args.projection_len())?,
            w_hh_t: prefix(OP, locked.f32(1, OP)?, h * width)?,
            b_hh: prefix(OP, locked.f32(2, OP)?, width)?,
            h0: prefix(OP, locked.f32(3, OP)?, state)?,
            c0: if lstm { Some(prefix(OP, locked.f32(4, OP)?, state)?) } else { None },
        };
        let (packed, saved) = recurrent::forward(&inputs, args)?;
        Ok((f32_storage(packed), f32_storage(saved)))
    }

    fn recurrent_backward(
        &self,
        dpacked: &Storage,
        saved: &Storage,
        packed: &Storage,
        w_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Option<Storage>, Storage, Option<Storage>)> {
        const OP: &str = "recurrent";
        args.check(OP)?;
        let lstm = args.cell == RecurrentCell::Lstm;
        if lstm != c0.is_some() {
            return Err(Error::invalid(OP, "an LSTM takes c0, a GRU does not"));
        }
        let storages: Vec<&Storage> =
            [Some(dpacked), Some(saved), Some(packed), Some(w_hh), Some(h0), c0].into_iter().flatten().collect();
        let locked = read_all(OP, &storages)?;
        let (h, width) = (args.hidden, args.width());
        let state = args.batch * h;
        let inputs = recurrent::BackwardInputs {
            dpacked: prefix(OP, locked.f32(0, OP)?, args.packed_len())?,
            saved: prefix(OP, locked.f32(1, OP)?, args.saved_len())?,
            packed: prefix(OP, locked.f32(2, OP)?, args.packed_len())?,
            w_hh: prefix(OP, locked.f32(3, OP)?, width * h)?,
            h0: prefix(OP, locked.f32(4, OP)?, state)?,
            c0: if lstm { Some(prefix(OP, locked.f32(5, OP)?, state)?) } else { None },
        };
        let (dgx, dgh, dh0, dc0) = recurrent::backward(&inputs, args)?;
        Ok((f32_storage(dgx), dgh.map(f32_storage), f32_storage(dh0), dc0.map(f32_storage)))
    }

    fn affine_warp(&self, x: &Storage, matrices: &Storage, args: &WarpArgs) -> Result<Storage> {
        const OP: &str = "affine_warp";
        let locked = read_all(OP, &[x, matrices])?;
        let (x, m) = (locked.f32(0, OP)?, locked.f32(1, OP)?);
        check_dims(OP, &[args.batch, args.channels, args.height, args.width], x.len())?;
        check_dims(OP, &[args.batch, 6], m.len())?;
        Ok(f32_storage(warp::affine_warp(x, m, args)?))
    }

    fn im2col(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "im2col", |x| {
            geom.check_window("im2col")?;
            check_dims("im2col", &[geom.batch, geom.channels, geom.in_h, geom.in_w], x.len())?;
            Ok(f32_storage(conv::im2col(x, geom)?))
        })
    }

    fn col2im(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(cols, "col2im", |c| {
            let g = geom;
            g.check_window("col2im")?;
            check_dims("col2im", &[g.batch, g.channels, g.kernel_h, g.kernel_w, g.out_h, g.out_w], c.len())?;
            Ok(f32_storage(conv::col2im(c, geom)?))
        })
    }

    fn conv2d(
        &self,
        x: &Storage,
        weight: &Storage,
        bias: Option<&Storage>,
        args: &Conv2dArgs,
    ) -> Result<Option<Storage>> {
        const OP: &str = "conv2d";
        if !conv2d::supports(args) {
            return Ok(None);
        }
        check_conv(OP, args)?;
        let storages: Vec<&Storage> = [x, weight].into_iter().chain(bias).collect();
        let locked = read_all(OP, &storages)?;
        let bias = bias.is_some().then(|| locked.f32(2, OP)).transpose()?;
        Ok(Some(f32_storage(conv2d::conv2d(locked.f32(0, OP)?, locked.f32(1, OP)?, bias, args)?)))
    }

    fn conv2d_backward(
        &self,
        x: &Storage,
        weight: &Storage,
        grad: &Storage,
        args: &Conv2dArgs,
        wanted: Conv2dWanted,
    ) -> Result<Conv2dGrads<Storage>> {
        const OP: &str = "conv2d";
        check_conv(OP, args)?;
        let locked = read_all(OP, &[x, weight, grad])?;
        let (x, w, g) = (locked.f32(0, OP)?, locked.f32(1, OP)?, locked.f32(2, OP)?);
        let grads = conv2d::conv2d_backward(x, w, g, args, wanted)?;
        Ok(Conv2dGrads {
            x: grads.x.map(f32_storage),
            weight: grads.weight.map(f32_storage),
            bias: grads.bias.map(f32_storage),
        })
    }

    fn max_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<(Storage, Storage)> {
        read_f32!(x, "max_pool2d", |x| {
            geom.check_window("max_pool2d")?;
            check_dims("max_pool2d", &[geom.batch, geom.channels, geom.in_h, geom.in_w], x.len())?;
            let (out, arg) = conv::max_pool2d(x, geom)?;
            Ok((f32_storage(out), u32_storage(arg)))
        })
    }

    fn max_pool2d_backward(&self, grad: &Storage, argmax: &Storage, geom: &ConvGeom) -> Result<Storage> {
        const OP: &str = "max_pool2d";
        let locked = read_all(OP, &[grad, argmax])?;
        let (g, a) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        geom.check_window(OP)?;
        check_dims(OP, &[geom.batch, geom.channels, geom.out_h, geom.out_w], g.len().min(a.len()))?;
        Ok(f32_storage(conv::max_pool2d_backward(g, a, geom)?))
    }

    fn avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "avg_pool2d", |x| {
            geom.check_window("avg_pool2d")?;
            check_pool_input("avg_pool2d", geom, x.len())?;
            Ok(f32_storage(conv::avg_pool2d(x, geom, false)?))
        })
    }

    fn avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(grad, "avg_pool2d", |g| {
            geom.check_window("avg_pool2d")?;
            check_pool_grad("avg_pool2d", geom, g.len())?;
            Ok(f32_storage(conv::avg_pool2d_backward(g, geom, false)?))
        })
    }

    fn adaptive_avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "adaptive_avg_pool2d", |x| {
            check_adaptive("adaptive_avg_pool2d", geom)?;
            check_pool_input("adaptive_avg_pool2d", geom, x.len())?;
            Ok(f32_storage(conv::avg_pool2d(x, geom, true)?))
        })
    }

    fn adaptive_avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(grad, "adaptive_avg_pool2d", |g| {
            check_adaptive("adaptive_avg_pool2d", geom)?;
            check_pool_grad("adaptive_avg_pool2d", geom, g.len())?;
            Ok(f32_storage(conv::avg_pool2d_backward(g, geom, true)?))
        })
    }

    fn index_select(&self, x: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        const OP: &str = "index_select";
        let locked = read_all(OP, &[x, idx])?;
        let (x, i) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        check_index_args(OP, args, x.len(), args.len, i)?;
        Ok(f32_storage(index::index_select(x, i, args)?))
    }

    fn index_add(&self, grad: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        const OP: &str = "index_select";
        let locked = read_all(OP, &[grad, idx])?;
        let (g, i) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        check_index_args(OP, args, g.len(), args.count, i)?;
        Ok(f32_storage(index::index_add(g, i, args)?))
    }

    fn gather(&self, x: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        const OP: &str = "gather";
        let locked = read_all(OP, &[x, idx])?;
        let (x, i) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        check_gather_args(OP, args, x.len(), i)?;
        Ok(f32_storage(index::gather(x, i, args)?))
    }

    fn scatter_add(&self, grad: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        const OP: &str = "gather";
        let locked = read_all(OP, &[grad, idx])?;
        let (g, i) = (locked.f32(0, OP)?, locked.u32(1, OP)?);
        check_gather_args(OP, args, usize::MAX, i)?;
        check_dims(OP, &[args.outer, args.count, args.inner], g.len())?;
        Ok(f32_storage(index::scatter_add(g, i, args)?))
    }

    fn optimizer_steps(&self, updates: &[OptimizerUpdate<'_>]) -> Result<()> {
        updates.iter().try_for_each(|u| self.optimizer_update(&u.step, u.param, u.grad, u.state, u.len))
    }

    fn unscale_grad(&self, grad: &Storage, len: usize, inv_scale: f32, found_non_finite: &Storage) -> Result<Storage> {
        const OP: &str = "unscale_grad";
        denormals::ensure_flushed();
        if grad.same_memory(found_non_finite) {
            return Err(Error::invalid(OP, "the non-finite flag shares memory with the gradient"));
        }
        let mut out = buffer_pool::take(OP, len)?;
        // The flag is written in place: locked with the gradient in the global order.
        let mut locked = lock_all(OP, &[(grad, Access::Read), (found_non_finite, Access::Write)])?;
        let mut slots = locked.split(OP)?.into_iter();
        let (Some(g), Some(flag)) = (slots.next(), slots.next()) else {
            return Err(Error::invalid(OP, "a gradient and a flag expected"));
        };
        let grad = prefix(OP, g.read(OP)?.as_f32(OP)?, len)?;
        let flag = flag.write(OP)?.as_u32_mut(OP)?.first_mut().ok_or_else(|| short(OP, 1))?;
        if optim::unscale_grad(&mut out, grad, inv_scale) {
            *flag = 1;
        }
        Ok(f32_storage(out))
    }

    fn sum_squares(&self, tensors: &[(&Storage, usize)]) -> Result<Storage> {
        Self::sum_squares_of(tensors)
    }
}

impl CpuBackend {
    fn sum_squares_of(tensors: &[(&Storage, usize)]) -> Result<Storage> {
        const OP: &str = "sum_squares";
        let storages: Vec<&Storage> = tensors.iter().map(|&(s, _)| s).collect();
        let locked = read_all(OP, &storages)?;
        let values = tensors
            .iter()
            .enumerate()
            .map(|(i, &(_, len))| prefix(OP, locked.f32(i, OP)?, len))
            .collect::<Result<Vec<&[f32]>>>()?;
        Ok(f32_storage(vec![reduce::sum_squares(&values)]))
    }

    /// One update of [`Backend::optimizer_steps`].
    fn optimizer_update(
        &self,
        step: &OptimizerStep,
        param: &Storage,
        grad: &Storage,
        state: &[&Storage],
        len: usize,
    ) -> Result<()> {
        const OP: &str = "optimizer";
        denormals::ensure_flushed();
        // A gradient sharing memory with what the step writes is read from a copy.
        let staged;
        let grad = if std::iter::once(&param).chain(state).any(|s| s.same_memory(grad)) {
            staged = f32_storage(self.to_f32(grad, &Layout::contiguous(&[grad.len()]))?);
            &staged
        } else {
            grad
        };
        let requests: Vec<(&Storage, Access)> = [(param, Access::Write), (grad, Access::Read)]
            .into_iter()
            .chain(state.iter().map(|&s| (s, Access::Write)))
            .collect();
        let mut locked = lock_all(OP, &requests)?;
        let mut slots = locked.split(OP)?.into_iter();
        let param = slots.next().map(|s| s.write(OP)).transpose()?.map(|p| p.as_f32_mut(OP)).transpose()?;
        let grad = slots.next().map(|s| s.read(OP)).transpose()?.map(|g| g.as_f32(OP)).transpose()?;
        let (Some(param), Some(grad)) = (param, grad) else {
            return Err(Error::invalid(OP, "a parameter and a gradient expected"));
        };
        let mut state_slices = slots
            .map(|s| s.write(OP)?.as_f32_mut(OP)?.get_mut(..len).ok_or_else(|| short(OP, len)))
            .collect::<Result<Vec<_>>>()?;
        let param = param.get_mut(..len).ok_or_else(|| short(OP, len))?;
        let grad = grad.get(..len).ok_or_else(|| short(OP, len))?;
        optim::optimizer_step(step, param, grad, &mut state_slices);
        Ok(())
    }
}

/// A fused convolution's geometry and its weight and output sizes, checked.
fn check_conv(op: &'static str, a: &Conv2dArgs) -> Result<()> {
    let g = &a.geom;
    a.geom.check_window(op)?;
    if a.groups == 0 || !g.channels.is_multiple_of(a.groups) || !a.out_channels.is_multiple_of(a.groups) {
        return Err(Error::invalid(
            op,
            format!("groups {} for {} and {} channels", a.groups, g.channels, a.out_channels),
        ));
    }
    crate::layout::checked_numel(op, &[a.out_channels, g.channels, g.kernel_h, g.kernel_w])?;
    crate::layout::checked_numel(op, &[g.batch, a.out_channels, g.out_h, wp_of(g)?])?;
    Ok(())
}

fn wp_of(g: &ConvGeom) -> Result<usize> {
    crate::layout::checked_add("conv2d", "padded width", g.in_w, g.pad_w.saturating_mul(2))
}

/// Adaptive windows are bounded by `i·size / out` for `i` up to `out`: that product must fit.
fn check_adaptive(op: &'static str, g: &ConvGeom) -> Result<()> {
    crate::layout::checked_mul(op, "window bound", g.out_h, g.in_h)?;
    crate::layout::checked_mul(op, "window bound", g.out_w, g.in_w)?;
    Ok(())
}

/// A pooling input of `len` elements against `geom`.
fn check_pool_input(op: &'static str, geom: &ConvGeom, len: usize) -> Result<()> {
    geom.check(op)?;
    check_dims(op, &[geom.batch, geom.channels, geom.in_h, geom.in_w], len)
}

/// A pooling gradient of `len` elements against `geom`.
fn check_pool_grad(op: &'static str, geom: &ConvGeom, len: usize) -> Result<()> {
    geom.check(op)?;
    check_dims(op, &[geom.batch, geom.channels, geom.out_h, geom.out_w], len)
}

/// Every index below `limit`, or `IndexOutOfRange` at the first that is not.
/// Class targets below `args.classes`, or equal to its `ignore_index`.
fn check_targets(op: &'static str, targets: &[u32], args: &CrossEntropyArgs) -> Result<()> {
    let bad = |&t: &u32| t as usize >= args.classes && Some(t) != args.ignore_index;
    match targets.iter().position(bad) {
        None => Ok(()),
        Some(position) => {
            Err(Error::IndexOutOfRange { op, index: targets[position] as i64, limit: args.classes, position })
        }
    }
}

/// The `[classes]` weights, locked storage `slot` when passed (which `args.weighted` must agree
/// with).
fn class_weights<'a>(
    op: &'static str,
    locked: &'a Locked<'_>,
    slot: Option<usize>,
    args: &CrossEntropyArgs,
) -> Result<Option<&'a [f32]>> {
    if slot.is_some() != args.weighted {
        return Err(Error::invalid(op, "the weight storage and the arguments disagree"));
    }
    let Some(slot) = slot else {
        return Ok(None);
    };
    let w = locked.f32(slot, op)?;
    check_dims(op, &[args.classes], w.len())?;
    Ok(Some(&w[..args.classes]))
}

fn check_indices(op: &'static str, indices: &[u32], limit: usize) -> Result<()> {
    match indices.iter().position(|&i| i as usize >= limit) {
        None => Ok(()),
        Some(position) => Err(Error::IndexOutOfRange { op, index: indices[position] as i64, limit, position }),
    }
}

/// Values `[outer, rows, inner]` (at most `values` elements; `rows` is the values operand's
/// indexed axis) and `count` indices, each below `len`.
fn check_index_args(op: &'static str, a: &IndexArgs, values: usize, rows: usize, indices: &[u32]) -> Result<()> {
    check_dims(op, &[a.outer, rows, a.inner], values)?;
    check_dims(op, &[a.count], indices.len())?;
    checked_output(op, &[a.outer, a.len.max(a.count), a.inner])?;
    check_indices(op, &indices[..a.count], a.len)
}

/// A gather's source (`[outer, len, inner]`, at most `values` elements) and its indices
/// (`[outer, count, inner]`, each below `len`).
fn check_gather_args(op: &'static str, a: &GatherArgs, values: usize, indices: &[u32]) -> Result<()> {
    check_dims(op, &[a.outer, a.len, a.inner], values)?;
    check_dims(op, &[a.outer, a.count, a.inner], indices.len())?;
    checked_output(op, &[a.outer, a.len.max(a.count), a.inner])?;
    check_indices(op, &indices[..a.outer * a.count * a.inner], a.len)
}

/// The element count of an output of `dims`, checked.
fn checked_output(op: &'static str, dims: &[usize]) -> Result<()> {
    crate::layout::checked_numel(op, dims).map(drop)
}

fn short(op: &'static str, len: usize) -> Error {
    Error::shape(op, format!("an operand holds fewer than {len} elements"))
}

/// `Ok` when a buffer of `len` elements holds the product of `dims` (checked).
fn check_dims(op: &'static str, dims: &[usize], len: usize) -> Result<()> {
    match crate::layout::checked_numel(op, dims)? {
        need if need <= len => Ok(()),
        _ => Err(Error::shape(op, format!("kernel dims {dims:?} exceed the {len} elements of the operand"))),
    }
}

/// [`copy::copy_strided`] after checking both layouts against their buffers.
fn copy_checked<T: Copy + Send + Sync>(
    src: &[T],
    src_layout: &Layout,
    dst: &mut [T],
    dst_layout: &Layout,
) -> Result<()> {
    check_fits("copy", src_layout, src.len())?;
    check_fits("copy", dst_layout, dst.len())?;
    copy::copy_strided(src, src_layout, dst, dst_layout);
    Ok(())
}
