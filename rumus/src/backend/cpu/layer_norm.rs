//! Layer normalisation over rows, forward and the input gradient, one row per task in parallel;
//! the parameter gradients, one block of columns per task.

use rayon::prelude::*;

use super::buffer_pool;
use crate::backend::LayerNormArgs;
use crate::Result;

const OP: &str = "layer_norm";

/// `(y, mean, rstd)`: each row normalised (mean 0, biased variance 1), scaled by `weight` and
/// shifted by `bias` where given.
pub fn layer_norm(
    x: &[f32],
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    a: &LayerNormArgs,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let cols = a.cols;
    let mut y = buffer_pool::take(OP, a.rows * cols)?;
    let mut mean = buffer_pool::zeroed(OP, a.rows)?;
    let mut rstd = buffer_pool::zeroed(OP, a.rows)?;
    let stats = mean.par_iter_mut().zip(rstd.par_iter_mut());
    y.par_chunks_mut(cols).zip(x.par_chunks(cols)).zip(stats).for_each(|((y, x), (m, r))| {
        let mu = x.iter().sum::<f32>() / cols as f32;
        let var = x.iter().map(|&v| (v - mu) * (v - mu)).sum::<f32>() / cols as f32;
        let inv = 1.0 / (var + a.eps).sqrt();
        for (j, (y, &x)) in y.iter_mut().zip(x).enumerate() {
            let w = weight.map_or(1.0, |w| w[j]);
            let b = bias.map_or(0.0, |b| b[j]);
            *y = (x - mu) * inv * w + b;
        }
        (*m, *r) = (mu, inv);
    });
    Ok((y, mean, rstd))
}

/// `dx = rstd·(g - mean(g) - x̂·mean(g·x̂))` per row, `g = dy·weight`, `x̂ = (x - mean)·rstd`.
pub fn layer_norm_backward(
    x: &[f32],
    weight: Option<&[f32]>,
    mean: &[f32],
    rstd: &[f32],
    dy: &[f32],
    a: &LayerNormArgs,
) -> Result<Vec<f32>> {
    let cols = a.cols;
    let mut dx = buffer_pool::take(OP, a.rows * cols)?;
    let rows = x.par_chunks(cols).zip(dy.par_chunks(cols)).zip(mean.par_iter().zip(rstd.par_iter()));
    dx.par_chunks_mut(cols).zip(rows).for_each(|(dx, ((x, dy), (&mu, &inv)))| {
        let g = |j: usize| dy[j] * weight.map_or(1.0, |w| w[j]);
        let (mut sum_g, mut sum_gx) = (0.0f32, 0.0f32);
        for (j, &x) in x.iter().enumerate() {
            sum_g += g(j);
            sum_gx += g(j) * (x - mu) * inv;
        }
        let (mean_g, mean_gx) = (sum_g / cols as f32, sum_gx / cols as f32);
        for (j, (dx, &x)) in dx.iter_mut().zip(x).enumerate() {
            *dx = inv * (g(j) - mean_g - (x - mu) * inv * mean_gx);
        }
    });
    Ok(dx)
}

/// Columns per task of [`param_grads`].
const PARAM_COLUMNS: usize = 64;

/// `(dweight, dbias)`: `Σ_rows dy·x̂` and `Σ_rows dy` per column, `x̂ = (x - mean)·rstd`, each
/// column's rows added in order (blocks of columns in parallel: the threads do not change a bit).
pub fn param_grads(
    x: &[f32],
    mean: &[f32],
    rstd: &[f32],
    dy: &[f32],
    a: &LayerNormArgs,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let cols = a.cols;
    let mut dw = buffer_pool::zeroed(OP, cols)?;
    let mut db = buffer_pool::zeroed(OP, cols)?;
    let blocks = dw.par_chunks_mut(PARAM_COLUMNS).zip(db.par_chunks_mut(PARAM_COLUMNS)).enumerate();
    blocks.for_each(|(k, (dw, db))| {
        let first = k * PARAM_COLUMNS;
        for (r, (&mu, &inv)) in mean.iter().zip(rstd).enumerate() {
            let at = r * cols + first;
            let (x, dy) = (&x[at..at + dw.len()], &dy[at..at + dw.len()]);
            for (((w, b), &x), &g) in dw.iter_mut().zip(db.iter_mut()).zip(x).zip(dy) {
                *w += g * ((x - mu) * inv);
                *b += g;
            }
        }
    });
    Ok((dw, db))
}
