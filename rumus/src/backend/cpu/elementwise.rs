//! Unary and binary elementwise kernels on the host.

use rayon::prelude::*;

use super::buffer_pool;
use super::erf;
use super::parallel::PAR_THRESHOLD;
use crate::backend::{BinaryOp, UnaryOp};
use crate::{Layout, Result};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_TANH_C: f32 = 0.044_715;
const INV_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f32 = 0.398_942_3;

/// The logistic function (also the recurrent cells' gate, `recurrent.rs`).
pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Exact GELU, `x Φ(x)`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf::erf(x * INV_SQRT_2))
}

/// `d gelu(x) / dx = Φ(x) + x φ(x)`.
#[inline(always)]
fn gelu_derivative(x: f32) -> f32 {
    0.5 * (1.0 + erf::erf(x * INV_SQRT_2)) + x * INV_SQRT_2PI * erf::exp(-0.5 * x * x)
}

/// The gradient `g` through GELU at `x`.
#[inline(always)]
fn gelu_backward(x: f32, g: f32) -> f32 {
    g * gelu_derivative(x)
}

/// `op(x)` for one element.
pub fn unary_scalar(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu(a) => {
            if x > 0.0 {
                x
            } else {
                a * x
            }
        }
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Gelu => gelu(x),
        UnaryOp::GeluTanh => 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).tanh()),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::AddScalar(s) => x + s,
        UnaryOp::MulScalar(s) => x * s,
        UnaryOp::Powf(p) => x.powf(p),
        UnaryOp::Clamp(lo, hi) => x.max(lo).min(hi),
    }
}

/// `d op(x) / dx` given input `x` and output `y`.
pub fn unary_derivative(op: UnaryOp, x: f32, y: f32) -> f32 {
    match op {
        UnaryOp::Neg => -1.0,
        UnaryOp::Exp => y,
        UnaryOp::Log => 1.0 / x,
        UnaryOp::Sqrt => 0.5 / y,
        UnaryOp::Abs => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        UnaryOp::Relu => (x > 0.0) as u8 as f32,
        UnaryOp::LeakyRelu(a) => {
            if x > 0.0 {
                1.0
            } else {
                a
            }
        }
        UnaryOp::Sigmoid => y * (1.0 - y),
        UnaryOp::Tanh => 1.0 - y * y,
        UnaryOp::Gelu => gelu_derivative(x),
        UnaryOp::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).tanh();
            0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)
        }
        UnaryOp::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        UnaryOp::AddScalar(_) => 1.0,
        UnaryOp::MulScalar(s) => s,
        UnaryOp::Powf(p) => p * x.powf(p - 1.0),
        UnaryOp::Clamp(lo, hi) => (x >= lo && x <= hi) as u8 as f32,
    }
}

/// Elements per parallel task: large enough to amortise scheduling, small enough to balance.
const CHUNK: usize = 1 << 14;

/// GELU of each element of `x` into `o`, 16 or 8 lanes wide where the CPU has AVX-512 or AVX2.
fn gelu_slice(o: &mut [f32], x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    match wide_lanes() {
        // SAFETY: each function only requires the instructions its lane count names, which
        // `wide_lanes` found the CPU to support.
        16 => return unsafe { avx512::gelu_slice(o, x) },
        // SAFETY: as above.
        8 => return unsafe { avx2::gelu_slice(o, x) },
        _ => {}
    }
    o.iter_mut().zip(x).for_each(|(o, &x)| *o = gelu(x));
}

/// The gradients `g` through GELU at `x` into `o`, as wide as [`gelu_slice`].
fn gelu_backward_slice(o: &mut [f32], x: &[f32], g: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    match wide_lanes() {
        // SAFETY: each function only requires the instructions its lane count names, which
        // `wide_lanes` found the CPU to support.
        16 => return unsafe { avx512::gelu_backward_slice(o, x, g) },
        // SAFETY: as above.
        8 => return unsafe { avx2::gelu_backward_slice(o, x, g) },
        _ => {}
    }
    o.iter_mut().zip(x.iter().zip(g)).for_each(|(o, (&x, &g))| *o = gelu_backward(x, g));
}

/// The widest f32 vectors this CPU has: 16 (AVX-512), 8 (AVX2) or 4 (SSE2).
#[cfg(target_arch = "x86_64")]
fn wide_lanes() -> usize {
    if std::arch::is_x86_feature_detected!("avx512f") {
        16
    } else if std::arch::is_x86_feature_detected!("avx2") {
        8
    } else {
        4
    }
}

/// The GELU loops compiled for wider vectors than the SSE2 baseline (the same IEEE operations
/// lane by lane, so the same results). Index loops calling the `inline(always)` element
/// functions directly: a call through a closure or an iterator adapter would not be inlined
/// into a function with other target features.
#[cfg(target_arch = "x86_64")]
macro_rules! gelu_loops {
    ($module:ident, $feature:literal) => {
        mod $module {
            use super::{gelu, gelu_backward};

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn gelu_slice(o: &mut [f32], x: &[f32]) {
                let n = o.len().min(x.len());
                let (o, x) = (&mut o[..n], &x[..n]);
                for i in 0..n {
                    o[i] = gelu(x[i]);
                }
            }

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn gelu_backward_slice(o: &mut [f32], x: &[f32], g: &[f32]) {
                let n = o.len().min(x.len()).min(g.len());
                let (o, x, g) = (&mut o[..n], &x[..n], &g[..n]);
                for i in 0..n {
                    o[i] = gelu_backward(x[i], g[i]);
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
gelu_loops!(avx2, "avx2");
#[cfg(target_arch = "x86_64")]
gelu_loops!(avx512, "avx512f");

/// `f` applied to each element of `x`, into a pooled buffer (no zero fill). Callers pass a
/// closure with the op fixed so the loop is specialised and vectorised.
fn map1(op: &'static str, x: &[f32], f: impl Fn(f32) -> f32 + Sync) -> Result<Vec<f32>> {
    map1_slices(op, x, |o, x| o.iter_mut().zip(x).for_each(|(o, &x)| *o = f(x)))
}

/// `kernel(out, x)` over chunks of `x` (in parallel when large), into a pooled buffer.
fn map1_slices(op: &'static str, x: &[f32], kernel: impl Fn(&mut [f32], &[f32]) + Sync) -> Result<Vec<f32>> {
    let mut out = buffer_pool::take(op, x.len())?;
    if x.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK)).for_each(|(o, x)| kernel(o, x));
    } else {
        kernel(&mut out, x);
    }
    Ok(out)
}

/// `f` applied pairwise to two equally long slices.
fn map2(op: &'static str, a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Result<Vec<f32>> {
    map2_slices(op, a, b, |o, a, b| o.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&a, &b))| *o = f(a, b)))
}

/// `kernel(out, a, b)` over chunks of two equally long slices, into a pooled buffer.
fn map2_slices(
    op: &'static str,
    a: &[f32],
    b: &[f32],
    kernel: impl Fn(&mut [f32], &[f32], &[f32]) + Sync,
) -> Result<Vec<f32>> {
    let mut out = buffer_pool::take(op, a.len())?;
    if a.len() >= PAR_THRESHOLD {
        let chunks = out.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK)));
        chunks.for_each(|(o, (a, b))| kernel(o, a, b));
    } else {
        kernel(&mut out, a, b);
    }
    Ok(out)
}

pub fn unary(op: UnaryOp, x: &[f32]) -> Result<Vec<f32>> {
    // The hot ops get a loop of their own; the rest share one that matches per element.
    match op {
        UnaryOp::Relu => map1(op.name(), x, |v| v.max(0.0)),
        UnaryOp::MulScalar(s) => map1(op.name(), x, |v| v * s),
        UnaryOp::AddScalar(s) => map1(op.name(), x, |v| v + s),
        UnaryOp::Neg => map1(op.name(), x, |v| -v),
        UnaryOp::Gelu => map1_slices(op.name(), x, gelu_slice),
        _ => map1(op.name(), x, |v| unary_scalar(op, v)),
    }
}

pub fn unary_backward(op: UnaryOp, x: &[f32], y: &[f32], grad: &[f32]) -> Result<Vec<f32>> {
    match op {
        UnaryOp::Relu => map2(op.name(), x, grad, |x, g| if x > 0.0 { g } else { 0.0 }),
        UnaryOp::MulScalar(s) => map1(op.name(), grad, |g| g * s),
        UnaryOp::AddScalar(_) => map1(op.name(), grad, |g| g),
        UnaryOp::Gelu => map2_slices(op.name(), x, grad, gelu_backward_slice),
        _ => {
            let mut out = buffer_pool::take(op.name(), grad.len())?;
            let kernel = |(k, o): (usize, &mut [f32])| {
                let at = k * CHUNK;
                for (i, o) in o.iter_mut().enumerate() {
                    *o = grad[at + i] * unary_derivative(op, x[at + i], y[at + i]);
                }
            };
            if grad.len() >= PAR_THRESHOLD {
                out.par_chunks_mut(CHUNK).enumerate().for_each(kernel);
            } else {
                out.chunks_mut(CHUNK).enumerate().for_each(kernel);
            }
            Ok(out)
        }
    }
}

pub fn binary_scalar(op: BinaryOp, a: f32, b: f32) -> f32 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        BinaryOp::Eq => (a == b) as u8 as f32,
        BinaryOp::Gt => (a > b) as u8 as f32,
        BinaryOp::AddRelu => (a + b).max(0.0),
    }
}

/// Storage offsets of the first element of each row (last axis) of `layout`.
fn row_start(layout: &Layout, row: usize) -> usize {
    let shape = layout.shape();
    let strides = layout.strides();
    let mut rest = row;
    let mut at = layout.offset();
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        let dim = shape[axis];
        at += (rest % dim) * strides[axis];
        rest /= dim;
    }
    at
}

/// One output row from a contiguous lhs row and an rhs row that is contiguous or a single
/// broadcast value (a bias per row or per column), in loops the compiler vectorises.
fn binary_row(op: BinaryOp, o: &mut [f32], a: &[f32], b: &[f32]) {
    fn each(o: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
        match b {
            [b] => o.iter_mut().zip(a).for_each(|(o, &a)| *o = f(a, *b)),
            _ => o.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&a, &b))| *o = f(a, b)),
        }
    }
    match op {
        BinaryOp::Add => each(o, a, b, |a, b| a + b),
        BinaryOp::Sub => each(o, a, b, |a, b| a - b),
        BinaryOp::Mul => each(o, a, b, |a, b| a * b),
        BinaryOp::Div => each(o, a, b, |a, b| a / b),
        BinaryOp::AddRelu => each(o, a, b, |a, b| (a + b).max(0.0)),
        _ => each(o, a, b, |a, b| binary_scalar(op, a, b)),
    }
}

/// `lhs op rhs` over two views of the output's shape (broadcast strides may be 0).
pub fn binary(op: BinaryOp, lhs: &[f32], lhs_layout: &Layout, rhs: &[f32], rhs_layout: &Layout) -> Result<Vec<f32>> {
    let len = lhs_layout.numel();
    if len == 0 {
        return Ok(Vec::new());
    }
    if lhs_layout.is_contiguous() && rhs_layout.is_contiguous() {
        let (a, b) = (&lhs[lhs_layout.offset()..][..len], &rhs[rhs_layout.offset()..][..len]);
        return match op {
            BinaryOp::Add => map2(op.name(), a, b, |a, b| a + b),
            BinaryOp::Sub => map2(op.name(), a, b, |a, b| a - b),
            BinaryOp::Mul => map2(op.name(), a, b, |a, b| a * b),
            BinaryOp::Div => map2(op.name(), a, b, |a, b| a / b),
            BinaryOp::AddRelu => map2(op.name(), a, b, |a, b| (a + b).max(0.0)),
            _ => map2(op.name(), a, b, |a, b| binary_scalar(op, a, b)),
        };
    }
    let last = *lhs_layout.shape().last().unwrap_or(&1);
    let (ls, rs) =
        (lhs_layout.strides().last().copied().unwrap_or(0), rhs_layout.strides().last().copied().unwrap_or(0));
    let mut out = buffer_pool::take(op.name(), len)?;
    let kernel = |(row, o): (usize, &mut [f32])| {
        let (mut a, mut b) = (row_start(lhs_layout, row), row_start(rhs_layout, row));
        if ls == 1 && rs <= 1 {
            let b_row = if rs == 1 { &rhs[b..][..last] } else { &rhs[b..][..1] };
            return binary_row(op, o, &lhs[a..][..last], b_row);
        }
        for o in o.iter_mut() {
            *o = binary_scalar(op, lhs[a], rhs[b]);
            a += ls;
            b += rs;
        }
    };
    if len >= PAR_THRESHOLD {
        // Rows can be short (a conv bias add walks rows of one output plane): batch them.
        let rows_per_task = (CHUNK / last.max(1)).max(1);
        out.par_chunks_mut(last.max(1)).enumerate().with_min_len(rows_per_task).for_each(kernel);
    } else {
        out.chunks_mut(last.max(1)).enumerate().for_each(kernel);
    }
    Ok(out)
}
