//! Softmax, log-softmax and fused cross-entropy over rows.

use rayon::prelude::*;

use crate::Result;

use crate::backend::CrossEntropyArgs;

fn row_max(row: &[f32]) -> f32 {
    row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// The row's maximum and `sum(exp(x - max))`. Working relative to the maximum keeps every
/// exponent ≤ 0 (no overflow) and avoids adding `ln(sum)` to a large maximum, which would lose
/// the low bits at logits around 1e4.
pub fn max_and_sum_exp(row: &[f32]) -> (f32, f32) {
    let max = row_max(row);
    if max == f32::NEG_INFINITY {
        return (max, 0.0);
    }
    (max, row.iter().map(|&x| (x - max).exp()).sum())
}

pub fn softmax(x: &[f32], cols: usize, log: bool) -> Result<Vec<f32>> {
    let mut out = super::buffer_pool::take("softmax", x.len())?;
    if cols == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(cols).zip(x.par_chunks(cols)).for_each(|(o, row)| {
        let (max, sum) = max_and_sum_exp(row);
        let (log_sum, inv_sum) = (sum.ln(), 1.0 / sum);
        for (o, &v) in o.iter_mut().zip(row) {
            *o = if log { (v - max) - log_sum } else { (v - max).exp() * inv_sum };
        }
    });
    Ok(out)
}

/// softmax: `dx = y * (g - sum(g*y))`; log-softmax: `dx = g - exp(y) * sum(g)`.
pub fn softmax_backward(y: &[f32], grad: &[f32], cols: usize, log: bool) -> Result<Vec<f32>> {
    let mut out = super::buffer_pool::take("softmax_backward", y.len())?;
    if cols == 0 {
        return Ok(out);
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
    Ok(out)
}

/// Per-row loss `-sum(q * log_softmax(x))` with `q = (1-s)·onehot(t) + s/C`.
pub fn cross_entropy(logits: &[f32], targets: &[u32], args: &CrossEntropyArgs) -> Result<Vec<f32>> {
    let c = args.classes;
    let s = args.smoothing;
    let mut out = super::buffer_pool::zeroed("cross_entropy", args.rows)?;
    out.par_iter_mut().enumerate().for_each(|(r, o)| {
        let row = &logits[r * c..(r + 1) * c];
        let (max, sum) = max_and_sum_exp(row);
        let log_sum = sum.ln();
        let target = targets[r] as usize;
        let nll = (max - row[target]) + log_sum;
        *o = if s > 0.0 {
            // Mean of the gaps to the maximum, each in [0, spread]: exact at any logit size,
            // where summing the raw logits first would cancel catastrophically.
            let mean_nll = row.iter().map(|&x| max - x).sum::<f32>() / c as f32 + log_sum;
            (1.0 - s) * nll + s * mean_nll
        } else {
            nll
        };
    });
    Ok(out)
}

/// `d loss_r / d logits = g_r * (softmax(x_r) - q_r)`.
pub fn cross_entropy_backward(
    logits: &[f32],
    targets: &[u32],
    grad_rows: &[f32],
    args: &CrossEntropyArgs,
) -> Result<Vec<f32>> {
    let c = args.classes;
    let s = args.smoothing;
    let mut out = super::buffer_pool::take("cross_entropy", args.rows * c)?;
    out.par_chunks_mut(c.max(1)).enumerate().for_each(|(r, o)| {
        let row = &logits[r * c..(r + 1) * c];
        let (max, sum) = max_and_sum_exp(row);
        let inv_sum = 1.0 / sum;
        let g = grad_rows[r];
        let target = targets[r] as usize;
        for (j, o) in o.iter_mut().enumerate() {
            let q = s / c as f32 + if j == target { 1.0 - s } else { 0.0 };
            *o = g * ((row[j] - max).exp() * inv_sum - q);
        }
    });
    Ok(out)
}
