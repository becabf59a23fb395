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

/// The weight of class `j` (1 when unweighted).
fn weight_of(w: Option<&[f32]>, j: usize) -> f32 {
    w.map_or(1.0, |w| w[j])
}

/// The row's target class, `None` when the row is ignored.
fn target_class(t: u32, args: &CrossEntropyArgs) -> Option<usize> {
    (Some(t) != args.ignore_index).then_some(t as usize)
}

/// Per-row loss `-sum(q * w * log_softmax(x))` with `q = (1-s)·onehot(t) + s/C` (see
/// [`CrossEntropyArgs`]), then (with weights or an ignored value) the rows' weights `w[t]`.
pub fn cross_entropy(logits: &[f32], targets: &[u32], w: Option<&[f32]>, args: &CrossEntropyArgs) -> Result<Vec<f32>> {
    let (c, rows) = (args.classes, args.rows);
    let s = args.smoothing;
    let mut out = super::buffer_pool::zeroed("cross_entropy", rows * args.outputs_per_row())?;
    let (losses, weights) = out.split_at_mut(rows);
    losses.par_iter_mut().enumerate().for_each(|(r, o)| {
        let Some(target) = target_class(targets[r], args) else {
            *o = 0.0;
            return;
        };
        let row = &logits[r * c..(r + 1) * c];
        let (max, sum) = max_and_sum_exp(row);
        let log_sum = sum.ln();
        let nll = weight_of(w, target) * ((max - row[target]) + log_sum);
        *o = if s > 0.0 {
            // Sum of the gaps to the maximum, each in [0, spread]: exact at any logit size,
            // where summing the raw logits first would cancel catastrophically.
            let (gaps, total) = match w {
                None => (row.iter().map(|&x| max - x).sum::<f32>(), c as f32),
                Some(w) => (row.iter().zip(w).map(|(&x, &w)| w * (max - x)).sum::<f32>(), w.iter().sum()),
            };
            (1.0 - s) * nll + s / c as f32 * (gaps + total * log_sum)
        } else {
            nll
        };
    });
    // Empty unless weighted or ignoring.
    for (o, &t) in weights.iter_mut().zip(targets) {
        *o = target_class(t, args).map_or(0.0, |t| weight_of(w, t));
    }
    Ok(out)
}

/// `d loss_r / d x_j = g_r * (A·softmax(x_r)_j - q_j)` with `A = (1-s)·w[t] + (s/C)·Σw` and
/// `q_j = (1-s)·w[t]·[j = t] + (s/C)·w[j]`; zero on ignored rows.
pub fn cross_entropy_backward(
    logits: &[f32],
    targets: &[u32],
    w: Option<&[f32]>,
    grad_rows: &[f32],
    args: &CrossEntropyArgs,
) -> Result<Vec<f32>> {
    let c = args.classes;
    let s = args.smoothing;
    let total = w.map_or(c as f32, |w| w.iter().sum());
    let mut out = super::buffer_pool::take("cross_entropy", args.rows * c)?;
    out.par_chunks_mut(c.max(1)).enumerate().for_each(|(r, o)| {
        let Some(target) = target_class(targets[r], args) else {
            o.fill(0.0);
            return;
        };
        let row = &logits[r * c..(r + 1) * c];
        let (max, sum) = max_and_sum_exp(row);
        let inv_sum = 1.0 / sum;
        let g = grad_rows[r];
        let wt = (1.0 - s) * weight_of(w, target);
        let a = wt + s / c as f32 * total;
        for (j, o) in o.iter_mut().enumerate() {
            let q = s / c as f32 * weight_of(w, j) + if j == target { wt } else { 0.0 };
            *o = g * (a * (row[j] - max).exp() * inv_sum - q);
        }
    });
    Ok(out)
}
