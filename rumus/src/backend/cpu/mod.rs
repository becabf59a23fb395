//! The CPU backend: `gemm` for matmul, rayon across cores for everything large.

mod conv;
mod conv2d;
mod denormals;
mod elementwise;
mod index;
mod matmul;
mod optim;
mod parallel;
mod pool;
mod reduce;
mod softmax;
mod storage;

pub use pool::pooled_bytes;
pub(crate) use storage::{f32_storage, host, u32_storage};
pub use storage::{CpuData, CpuStorage};

use crate::backend::*;
use crate::{rng, Error, Layout, Result};

/// Kernels that run on the host.
#[derive(Debug, Default)]
pub struct CpuBackend;

/// Borrows the f32 elements of a CPU storage for the duration of `$body`.
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

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn from_f32(&self, data: &[f32]) -> Result<Storage> {
        let mut values = pool::take(data.len());
        values.copy_from_slice(data);
        Ok(f32_storage(values))
    }

    fn from_u32(&self, data: &[u32]) -> Result<Storage> {
        Ok(u32_storage(data.to_vec()))
    }

    fn to_f32(&self, src: &Storage, layout: &Layout) -> Result<Vec<f32>> {
        read_f32!(src, "to_vec", |x| {
            let mut out = pool::take(layout.numel());
            elementwise::copy_strided(x, layout, &mut out, &Layout::contiguous(layout.shape()));
            Ok(out)
        })
    }

    fn to_u32(&self, src: &Storage, layout: &Layout) -> Result<Vec<u32>> {
        read_u32!(src, "to_vec", |x| {
            let mut out = vec![0; layout.numel()];
            elementwise::copy_strided(x, layout, &mut out, &Layout::contiguous(layout.shape()));
            Ok(out)
        })
    }

    fn full(&self, len: usize, value: f32) -> Result<Storage> {
        Ok(f32_storage(pool::filled(len, value)))
    }

    fn copy_strided(&self, src: &Storage, src_layout: &Layout, dst: &Storage, dst_layout: &Layout) -> Result<()> {
        if src.same_memory(dst) {
            // Reading and writing one lock at once would deadlock: copy out first.
            let staged = match src.dtype() {
                DType::F32 => f32_storage(self.to_f32(src, src_layout)?),
                DType::U32 => u32_storage(self.to_u32(src, src_layout)?),
            };
            return self.copy_strided(&staged, &Layout::contiguous(src_layout.shape()), dst, dst_layout);
        }
        let src_guard = host(src, "copy")?.read();
        let mut dst_guard = host(dst, "copy")?.write();
        match (&*src_guard, &mut *dst_guard) {
            (CpuData::F32(s), CpuData::F32(d)) => {
                elementwise::copy_strided(s, src_layout, d.as_mut_slice(), dst_layout)
            }
            (CpuData::U32(s), CpuData::U32(d)) => {
                elementwise::copy_strided(s, src_layout, d.as_mut_slice(), dst_layout)
            }
            (s, _) => {
                let got = if matches!(s, CpuData::F32(_)) { "f32" } else { "u32" };
                return Err(Error::DType { op: "copy", expected: dst.dtype().name(), got });
            }
        }
        Ok(())
    }

    fn random(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage> {
        let key = rng::seed_key(seed);
        let sample = match kind {
            RandomKind::Uniform => rng::uniform,
            RandomKind::Normal => rng::normal,
        };
        let mut values = pool::take(len);
        values.iter_mut().enumerate().for_each(|(i, v)| *v = sample(key, i as u32));
        Ok(f32_storage(values))
    }

    fn unary(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage> {
        read_f32!(x, op.name(), |x| Ok(f32_storage(elementwise::unary(op, &x[..len]))))
    }

    fn unary_backward(&self, op: UnaryOp, x: &Storage, y: &Storage, grad: &Storage, len: usize) -> Result<Storage> {
        read_f32!(x, op.name(), |x| read_f32!(y, op.name(), |y| read_f32!(grad, op.name(), |g| {
            Ok(f32_storage(elementwise::unary_backward(op, &x[..len], &y[..len], &g[..len])))
        })))
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage> {
        read_f32!(lhs, op.name(), |l| read_f32!(rhs, op.name(), |r| {
            Ok(f32_storage(elementwise::binary(op, l, lhs_layout, r, rhs_layout)))
        }))
    }

    fn reduce(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        read_f32!(x, "reduce", |x| Ok(f32_storage(reduce::reduce(op, x, dims))))
    }

    fn argmax(&self, x: &Storage, dims: ReduceDims) -> Result<Storage> {
        read_f32!(x, "argmax", |x| Ok(u32_storage(reduce::argmax(x, dims))))
    }

    fn matmul(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage> {
        read_f32!(lhs, "matmul", |l| read_f32!(rhs, "matmul", |r| Ok(f32_storage(matmul::matmul(l, r, args)))))
    }

    fn softmax(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        read_f32!(x, "softmax", |x| Ok(f32_storage(softmax::softmax(&x[..rows * cols], cols, log))))
    }

    fn softmax_backward(&self, y: &Storage, grad: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        read_f32!(y, "softmax_backward", |y| read_f32!(grad, "softmax_backward", |g| {
            Ok(f32_storage(softmax::softmax_backward(&y[..rows * cols], &g[..rows * cols], cols, log)))
        }))
    }

    fn cross_entropy(&self, logits: &Storage, targets: &Storage, args: &CrossEntropyArgs) -> Result<Storage> {
        read_f32!(logits, "cross_entropy", |x| read_u32!(targets, "cross_entropy", |t| {
            Ok(f32_storage(softmax::cross_entropy(x, t, args)))
        }))
    }

    fn cross_entropy_backward(
        &self,
        logits: &Storage,
        targets: &Storage,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        read_f32!(logits, "cross_entropy", |x| read_u32!(targets, "cross_entropy", |t| read_f32!(
            grad_rows,
            "cross_entropy",
            |g| Ok(f32_storage(softmax::cross_entropy_backward(x, t, g, args)))
        )))
    }

    fn im2col(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "conv2d", |x| Ok(f32_storage(conv::im2col(x, geom))))
    }

    fn col2im(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(cols, "conv2d", |c| Ok(f32_storage(conv::col2im(c, geom))))
    }

    fn conv2d(
        &self,
        x: &Storage,
        weight: &Storage,
        bias: Option<&Storage>,
        args: &Conv2dArgs,
    ) -> Result<Option<Storage>> {
        if !conv2d::supports(args) {
            return Ok(None);
        }
        let bias_guard = bias.map(|b| host(b, "conv2d")).transpose()?.map(|b| b.read());
        let bias = bias_guard.as_ref().map(|b| b.as_f32("conv2d")).transpose()?;
        read_f32!(x, "conv2d", |x| read_f32!(weight, "conv2d", |w| {
            Ok(Some(f32_storage(conv2d::conv2d(x, w, bias, args))))
        }))
    }

    fn conv2d_backward(
        &self,
        x: &Storage,
        weight: &Storage,
        grad: &Storage,
        args: &Conv2dArgs,
        wanted: Conv2dWanted,
    ) -> Result<Conv2dGrads<Storage>> {
        read_f32!(x, "conv2d", |x| read_f32!(weight, "conv2d", |w| read_f32!(grad, "conv2d", |g| {
            let grads = conv2d::conv2d_backward(x, w, g, args, wanted);
            Ok(Conv2dGrads {
                x: grads.x.map(f32_storage),
                weight: grads.weight.map(f32_storage),
                bias: grads.bias.map(f32_storage),
            })
        })))
    }

    fn max_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<(Storage, Storage)> {
        read_f32!(x, "max_pool2d", |x| {
            let (out, arg) = conv::max_pool2d(x, geom);
            Ok((f32_storage(out), u32_storage(arg)))
        })
    }

    fn max_pool2d_backward(&self, grad: &Storage, argmax: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(grad, "max_pool2d", |g| read_u32!(argmax, "max_pool2d", |a| {
            Ok(f32_storage(conv::max_pool2d_backward(g, a, geom)))
        }))
    }

    fn avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "avg_pool2d", |x| Ok(f32_storage(conv::avg_pool2d(x, geom, false))))
    }

    fn avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(grad, "avg_pool2d", |g| Ok(f32_storage(conv::avg_pool2d_backward(g, geom, false))))
    }

    fn adaptive_avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(x, "adaptive_avg_pool2d", |x| Ok(f32_storage(conv::avg_pool2d(x, geom, true))))
    }

    fn adaptive_avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage> {
        read_f32!(grad, "adaptive_avg_pool2d", |g| Ok(f32_storage(conv::avg_pool2d_backward(g, geom, true))))
    }

    fn index_select(&self, x: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        read_f32!(x, "index_select", |x| read_u32!(idx, "index_select", |i| {
            Ok(f32_storage(index::index_select(x, i, args)))
        }))
    }

    fn index_add(&self, grad: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage> {
        read_f32!(grad, "index_select", |g| read_u32!(idx, "index_select", |i| {
            Ok(f32_storage(index::index_add(g, i, args)))
        }))
    }

    fn gather(&self, x: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        read_f32!(x, "gather", |x| read_u32!(idx, "gather", |i| Ok(f32_storage(index::gather(x, i, args)))))
    }

    fn scatter_add(&self, grad: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage> {
        read_f32!(grad, "gather", |g| read_u32!(idx, "gather", |i| Ok(f32_storage(index::scatter_add(g, i, args)))))
    }

    fn optimizer_step(
        &self,
        step: &OptimizerStep,
        param: &Storage,
        grad: &Storage,
        state: &[&Storage],
        len: usize,
    ) -> Result<()> {
        denormals::ensure_flushed();
        let grad_guard = host(grad, "optimizer")?.read();
        let grad = grad_guard.as_f32("optimizer")?;
        let mut state_guards =
            state.iter().map(|s| host(s, "optimizer").map(|s| s.write())).collect::<Result<Vec<_>>>()?;
        let mut state_slices = state_guards
            .iter_mut()
            .map(|g| g.as_f32_mut("optimizer").map(|s| &mut s[..len]))
            .collect::<Result<Vec<_>>>()?;
        let mut param_guard = host(param, "optimizer")?.write();
        let param = param_guard.as_f32_mut("optimizer")?;
        optim::optimizer_step(step, &mut param[..len], &grad[..len], &mut state_slices);
        Ok(())
    }
}
