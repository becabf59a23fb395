//! RMS normalisation over rows, forward and the input gradient, one row per task in parallel.

use rayon::prelude::*;

use super::buffer_pool;
use crate::backend::LayerNormArgs;
use crate::Result;

const OP: &str = "rms_norm";

/// `(y, rstd)`: each row divided by its root mean square `√(mean(x²) + eps)` and scaled by
/// `weight` where given; `rstd` is the reciprocal per row.
pub fn rms_norm(x: &[f32], weight: Option<&[f32]>, a: &LayerNormArgs) -> Result<(Vec<f32>, Vec<f32>)> {
    let cols = a.cols;
    let mut y = buffer_pool::take(OP, a.rows * cols)?;
    let mut rstd = buffer_pool::zeroed(OP, a.rows)?;
    y.par_chunks_mut(cols).zip(x.par_chunks(cols)).zip(rstd.par_iter_mut()).for_each(|((y, x), r)| {
        let mean_square = x.iter().map(|&v| v * v).sum::<f32>() / cols as f32;
        let inv = 1.0 / (mean_square + a.eps).sqrt();
        for (j, (y, &x)) in y.iter_mut().zip(x).enumerate() {
            *y = x * inv * weight.map_or(1.0, |w| w[j]);
        }
        *r = inv;
    });
    Ok((y, rstd))
}

/// `dx = rstd·(g - x̂·mean(g·x̂))` per row, `g = dy·weight`, `x̂ = x·rstd`.
pub fn rms_norm_backward(
    x: &[f32],
    weight: Option<&[f32]>,
    rstd: &[f32],
    dy: &[f32],
    a: &LayerNormArgs,
) -> Result<Vec<f32>> {
    let cols = a.cols;
    let mut dx = buffer_pool::take(OP, a.rows * cols)?;
    let rows = x.par_chunks(cols).zip(dy.par_chunks(cols)).zip(rstd.par_iter());
    dx.par_chunks_mut(cols).zip(rows).for_each(|(dx, ((x, dy), &inv))| {
        let g = |j: usize| dy[j] * weight.map_or(1.0, |w| w[j]);
        let sum_gx: f32 = x.iter().enumerate().map(|(j, &x)| g(j) * x * inv).sum();
        let mean_gx = sum_gx / cols as f32;
        for (j, (dx, &x)) in dx.iter_mut().zip(x).enumerate() {
            *dx = inv * (g(j) - x * inv * mean_gx);
        }
    });
    Ok(dx)
}
