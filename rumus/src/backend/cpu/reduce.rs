//! Reductions over the middle axis of `[outer, len, inner]`.

use rayon::prelude::*;

use super::parallel::PAR_THRESHOLD;
use crate::backend::{ReduceDims, ReduceOp};
use crate::Result;

fn identity(op: ReduceOp) -> f32 {
    match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Max => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
    }
}

fn combine(op: ReduceOp, acc: f32, x: f32) -> f32 {
    match op {
        ReduceOp::Sum => acc + x,
        // NaN wins, as in PyTorch: a NaN never silently disappears from a max.
        ReduceOp::Max => {
            if x > acc || x.is_nan() {
                x
            } else {
                acc
            }
        }
        ReduceOp::Min => {
            if x < acc || x.is_nan() {
                x
            } else {
                acc
            }
        }
    }
}

/// Sum of a contiguous run, in f64 lanes of 8: accurate on long rows and vectorised (a plain
/// `iter().sum()` is one dependent add per element).
pub(super) fn sum(values: &[f32]) -> f32 {
    lanes_sum(values, |x| x) as f32
}

/// The sum of `f` of every value, in f64 lanes of 8 (then the lanes, then the tail, in order).
fn lanes_sum(values: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    let mut lanes = [0.0f64; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += f(x as f64);
        }
    }
    lanes.iter().sum::<f64>() + tail.iter().map(|&x| f(x as f64)).sum::<f64>()
}

/// Elements per chunk of a long tensor in [`sum_squares`], summed in parallel.
const SQUARES_CHUNK: usize = 1 << 16;

/// The sum of the squares of every value of `tensors`, accumulated in f64: a long tensor in
/// chunks of a fixed size (in parallel, then added in order), so the bits do not depend on the
/// threads.
pub fn sum_squares(tensors: &[&[f32]]) -> f32 {
    let squares = |values: &[f32]| lanes_sum(values, |x| x * x);
    let tensor = |values: &[f32]| -> f64 {
        if values.len() < PAR_THRESHOLD {
            return squares(values);
        }
        let partials: Vec<f64> = values.par_chunks(SQUARES_CHUNK).map(squares).collect();
        partials.iter().sum()
    };
    tensors.iter().map(|t| tensor(t)).sum::<f64>() as f32
}

/// Reduces one `[len, inner]` block into `out` (length `inner`).
fn reduce_block(op: ReduceOp, block: &[f32], dims: ReduceDims, out: &mut [f32]) {
    out.fill(identity(op));
    if dims.inner == 1 {
        out[0] = match op {
            ReduceOp::Sum => sum(block),
            _ => block.iter().fold(identity(op), |acc, &x| combine(op, acc, x)),
        };
        return;
    }
    for row in block.chunks_exact(dims.inner) {
        for (o, &x) in out.iter_mut().zip(row) {
            *o = combine(op, *o, x);
        }
    }
}

pub fn reduce(op: ReduceOp, x: &[f32], dims: ReduceDims) -> Result<Vec<f32>> {
    // Every kernel path below writes each output (starting from the identity).
    let mut out = super::buffer_pool::take("reduce", dims.outer * dims.inner)?;
    let block = dims.len * dims.inner;
    if block == 0 {
        out.fill(identity(op));
        return Ok(out);
    }
    let x = &x[..dims.outer * block];
    if x.len() >= PAR_THRESHOLD && dims.outer > 1 {
        out.par_chunks_mut(dims.inner).zip(x.par_chunks(block)).for_each(|(o, b)| reduce_block(op, b, dims, o));
    } else if x.len() >= PAR_THRESHOLD && dims.inner > 1 {
        // One outer block: split the kept axis instead.
        let cols = dims.inner.div_ceil(rayon::current_num_threads().max(1));
        out.par_chunks_mut(cols).enumerate().for_each(|(c, o)| {
            o.fill(identity(op));
            for row in x.chunks_exact(dims.inner) {
                for (o, &v) in o.iter_mut().zip(&row[c * cols..]) {
                    *o = combine(op, *o, v);
                }
            }
        });
    } else {
        for (o, b) in out.chunks_mut(dims.inner).zip(x.chunks(block)) {
            reduce_block(op, b, dims, o);
        }
    }
    Ok(out)
}

pub fn argmax(x: &[f32], dims: ReduceDims) -> Result<Vec<u32>> {
    let mut out = super::buffer_pool::zeroed("argmax", dims.outer * dims.inner)?;
    let block = dims.len * dims.inner;
    for o in 0..dims.outer {
        for i in 0..dims.inner {
            let mut best = f32::NEG_INFINITY;
            let mut best_at = 0;
            for j in 0..dims.len {
                let v = x[o * block + j * dims.inner + i];
                if v > best || (v.is_nan() && !best.is_nan()) {
                    best = v;
                    best_at = j;
                }
            }
            out[o * dims.inner + i] = best_at as u32;
        }
    }
    Ok(out)
}
