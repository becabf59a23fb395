//! Softmax, log-softmax and fused cross-entropy over rows.

use rayon::prelude::*;

use crate::backend::CrossEntropyArgs;

fn row_max(row: &[f32]) -> f32 {
    row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// `log(sum(exp(row)))`, stable for large values; `-inf` for a row of `-inf`.
pub fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row_max(row);
    if max == f32::NEG_INFINITY {
        return max;
    }
    let sum: f32 = row.iter().map(|&x| (x - max).exp()).sum();
    max + sum.ln()
}

pub fn softmax(x: &[f32], cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols).zip(x.par_chunks(cols)).for_each(|(o, row)| {
        let lse = log_sum_exp(row);
        for (o, &v) in o.iter_mut().zip(row) {
            *o = if log { v - lse } else { (v - lse).exp() };
        }
    });
    out
}

/// softmax: `dx = y * (g - sum(g*y))`; log-softmax: `dx = g - exp(y) * sum(g)`.
pub fn softmax_backward(y: &[f32], grad: &[f32], cols: usize, log: bool) -> Vec<f32> {
    let mut out = vec![0.0; y.len()];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols).zip(y.par_chunks(cols).zip(grad.par_chunks(cols))).for_each(|(o, (y, g))| {
        if log {
            let sum: f32 = g.iter().sum();
            for i in 0..o.len() {
                o[i] = g[i] - y[i].exp() * sum;
            }
        } else {
            let dot: f32 = g.iter().zip(y).map(|(g, y)| g * y).sum();
            for i in 0..o.len() {
                o[i] = y[i] * (g[i] - dot);
            }
        }
    });
    out
}

/// Per-row loss `-sum(q * log_softmax(x))` with `q = (1-s)·onehot(t) + s/C`.
pub fn cross_entropy(logits: &[f32], targets: &[u32], args: &CrossEntropyArgs) -> Vec<f32> {
    let c = args.classes;
    let s = args.smoothing;
    let mut out = vec![0.0; args.rows];
    out.par_iter_mut().enumerate().for_each(|(r, o)| {
        let row = &logits[r * c..(r + 1) * c];
        let lse = log_sum_exp(row);
        let target = targets[r] as usize;
        let nll = lse - row[target];
        *o = if s > 0.0 {
            let mean_nll = lse - row.iter().sum::<f32>() / c as f32;
            (1.0 - s) * nll + s * mean_nll
        } else {
            nll
        };
    });
    out
}

/// `d loss_r / d logits = g_r * (softmax(x_r) - q_r)`.
pub fn cross_entropy_backward(logits: &[f32], targets: &[u32], grad_rows: &[f32], args: &CrossEntropyArgs) -> Vec<f32> {
    let c = args.classes;
    let s = args.smoothing;
    let mut out = vec![0.0; args.rows * c];
    out.par_chunks_mut(c.max(1)).enumerate().for_each(|(r, o)| {
        let row = &logits[r * c..(r + 1) * c];
        let lse = log_sum_exp(row);
        let g = grad_rows[r];
        let target = targets[r] as usize;
        for (j, o) in o.iter_mut().enumerate() {
            let q = s / c as f32 + if j == target { 1.0 - s } else { 0.0 };
            *o = g * ((row[j] - lse).exp() - q);
        }
    });
    out
}
