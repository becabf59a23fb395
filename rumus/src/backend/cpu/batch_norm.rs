//! Batch normalisation over the channels of `[batch, channels, inner]`, forward and backward:
//! per-channel sums over contiguous `inner` runs (channels in parallel), then one elementwise
//! pass (samples in parallel). With `BatchNormArgs::relu` a ReLU rides along: the forward's
//! pass writes `max(0, y)`, and the backward's passes read `dy` masked where the output was
//! not positive, recomputing `y` from `x` exactly as the forward did (no saved output).

use rayon::prelude::*;

use super::buffer_pool;
use super::parallel::PAR_THRESHOLD;
use crate::backend::BatchNormArgs;
use crate::Result;

const OP: &str = "batch_norm";

/// The `inner`-long runs of channel `c`, one per sample.
fn runs<'a>(x: &'a [f32], a: &BatchNormArgs, c: usize) -> impl Iterator<Item = &'a [f32]> + 'a {
    let (inner, stride) = (a.inner, a.channels * a.inner);
    (0..a.batch).map(move |n| &x[n * stride + c * inner..n * stride + (c + 1) * inner])
}

/// Lanes of the partial sums: independent accumulators the compiler keeps in SIMD registers
/// (one f32 accumulator would chain every add on the one before).
const LANES: usize = 8;

/// `(Σ (x_i - shift), Σ (x_i - shift)²)` over a run, in [`LANES`] partial sums each.
fn lane_moments(x: &[f32], shift: f32) -> (f32, f32) {
    let (mut s, mut q) = ([0.0f32; LANES], [0.0f32; LANES]);
    let chunks = x.chunks_exact(LANES);
    let (mut ts, mut tq) = (0.0f32, 0.0f32);
    for &v in chunks.remainder() {
        ts += v - shift;
        tq += (v - shift) * (v - shift);
    }
    for chunk in chunks {
        for l in 0..LANES {
            let d = chunk[l] - shift;
            s[l] += d;
            q[l] += d * d;
        }
    }
    (s.iter().sum::<f32>() + ts, q.iter().sum::<f32>() + tq)
}

/// `(Σ g_i, Σ g_i·(x_i - mu))` over a run, in [`LANES`] partial sums each, with
/// `g_i = gate(x_i, dy_i)` (`dy_i` itself, or the ReLU's masked gradient: one copy each).
fn lane_sums_dy(x: &[f32], dy: &[f32], mu: f32, gate: impl Fn(f32, f32) -> f32) -> (f32, f32) {
    let (mut s, mut sx) = ([0.0f32; LANES], [0.0f32; LANES]);
    let (xc, gc) = (x.chunks_exact(LANES), dy.chunks_exact(LANES));
    let (mut ts, mut tsx) = (0.0f32, 0.0f32);
    for (&x, &g) in xc.remainder().iter().zip(gc.remainder()) {
        let g = gate(x, g);
        ts += g;
        tsx += g * (x - mu);
    }
    for (x, g) in xc.zip(gc) {
        for l in 0..LANES {
            let g = gate(x[l], g[l]);
            s[l] += g;
            sx[l] += g * (x[l] - mu);
        }
    }
    (s.iter().sum::<f32>() + ts, sx.iter().sum::<f32>() + tsx)
}

/// The forward's map of one channel, `y = (x - mean)·scale + shift`: computed the same way by
/// the forward and by the backward's ReLU mask, so that both agree on every sign.
#[derive(Clone, Copy)]
struct Affine {
    mean: f32,
    scale: f32,
    shift: f32,
}

impl Affine {
    fn of(c: usize, weight: Option<&[f32]>, bias: Option<&[f32]>, mean: &[f32], var: &[f32], eps: f32) -> Self {
        Affine {
            mean: mean[c],
            scale: weight.map_or(1.0, |w| w[c]) / (var[c] + eps).sqrt(),
            shift: bias.map_or(0.0, |b| b[c]),
        }
    }

    fn apply(self, x: f32) -> f32 {
        (x - self.mean) * self.scale + self.shift
    }

    /// `g` where the output `apply(x)` is positive, else 0 (ReLU's gradient, 0 at 0).
    fn relu_grad(self, x: f32, g: f32) -> f32 {
        if self.apply(x) > 0.0 {
            g
        } else {
            0.0
        }
    }
}

/// Per-channel values `f(c)` computed in parallel when the tensor is large.
fn per_channel(a: &BatchNormArgs, f: impl Fn(usize) -> (f32, f32) + Sync + Send) -> (Vec<f32>, Vec<f32>) {
    let min_len = (PAR_THRESHOLD / a.count().max(1)).max(1);
    (0..a.channels).into_par_iter().with_min_len(min_len).map(f).unzip()
}

/// Writes `out[n, c, i] = f(c, x[n, c, i], y[n, c, i])`-style results sample by sample, in
/// parallel when the tensor is large: `row(c, out_run, n_offset)` fills one run.
fn each_run(out: &mut [f32], a: &BatchNormArgs, row: impl Fn(usize, &mut [f32], usize) + Sync + Send) {
    let sample = a.channels * a.inner;
    let min_len = (PAR_THRESHOLD / sample.max(1)).max(1);
    out.par_chunks_mut(sample).with_min_len(min_len).enumerate().for_each(|(n, out)| {
        for (c, run) in out.chunks_mut(a.inner).enumerate() {
            row(c, run, n * sample + c * a.inner);
        }
    });
}

/// `(y, mean, var)`: each channel normalised by the batch's mean and biased variance (or by
/// `stats` without `batch_stats`), scaled by `weight` and shifted by `bias` where given.
pub fn batch_norm(
    x: &[f32],
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    stats: Option<(&[f32], &[f32])>,
    a: &BatchNormArgs,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let (mean, var) = match stats {
        Some((m, v)) if !a.batch_stats => (m.to_vec(), v.to_vec()),
        _ => {
            let count = a.count() as f64;
            per_channel(a, |c| {
                // One pass of sums shifted by the channel's first value (no cancellation when
                // the mean is large against the spread): runs summed in f32 lanes, runs in f64.
                let shift = x[c * a.inner];
                let (mut sum, mut sq) = (0.0f64, 0.0f64);
                for r in runs(x, a, c) {
                    let (s, q) = lane_moments(r, shift);
                    sum += s as f64;
                    sq += q as f64;
                }
                let d = sum / count;
                (shift + d as f32, (sq / count - d * d).max(0.0) as f32)
            })
        }
    };
    // y = (x - mean)·scale + bias per channel (then max(0, y) with the ReLU).
    let coef: Vec<Affine> = (0..a.channels).map(|c| Affine::of(c, weight, bias, &mean, &var, a.eps)).collect();
    let mut y = buffer_pool::take(OP, x.len())?;
    each_run(&mut y, a, |c, y, at| {
        let k = coef[c];
        let x = &x[at..at + a.inner];
        if a.relu {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = k.apply(x).max(0.0);
            }
        } else {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = k.apply(x);
            }
        }
    });
    Ok((y, mean, var))
}

/// `(dx, dweight, dbias)` of [`batch_norm`]: see `Backend::batch_norm_backward` (`bias` is read
/// only by the ReLU's mask).
pub fn batch_norm_backward(
    x: &[f32],
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    mean: &[f32],
    var: &[f32],
    dy: &[f32],
    a: &BatchNormArgs,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let rstd: Vec<f32> = var.iter().map(|&v| 1.0 / (v + a.eps).sqrt()).collect();
    // The ReLU's mask per channel: the forward's map, recomputed.
    let mask = |c: usize| a.relu.then(|| Affine::of(c, weight, bias, mean, var, a.eps));
    // Σ dy and Σ dy·x̂ per channel (dy masked with the ReLU), in one pass over x and dy.
    let (db, dw) = per_channel(a, |c| {
        let (mu, inv, m) = (mean[c], rstd[c], mask(c));
        let (mut s, mut sx) = (0.0f64, 0.0f64);
        for (x, dy) in runs(x, a, c).zip(runs(dy, a, c)) {
            let (rs, rsx) = match m {
                Some(m) => lane_sums_dy(x, dy, mu, |x, g| m.relu_grad(x, g)),
                None => lane_sums_dy(x, dy, mu, |_, g| g),
            };
            s += rs as f64;
            sx += rsx as f64;
        }
        (s as f32, (sx as f32) * inv)
    });
    let m = a.count() as f32;
    // dx = k·dy + kx·(x - mean) + k0 per channel.
    let coef: Vec<(f32, f32, f32, f32)> = (0..a.channels)
        .map(|c| {
            let k = weight.map_or(1.0, |w| w[c]) * rstd[c];
            if a.batch_stats {
                (mean[c], k, -k * rstd[c] * dw[c] / m, -k * db[c] / m)
            } else {
                (mean[c], k, 0.0, 0.0)
            }
        })
        .collect();
    let mut dx = buffer_pool::take(OP, x.len())?;
    each_run(&mut dx, a, |c, dx, at| {
        let (mu, k, kx, k0) = coef[c];
        let pairs = dx.iter_mut().zip(&dy[at..at + a.inner]).zip(&x[at..at + a.inner]);
        match mask(c) {
            Some(m) => {
                for ((dx, &g), &x) in pairs {
                    *dx = k * m.relu_grad(x, g) + kx * (x - mu) + k0;
                }
            }
            None => {
                for ((dx, &g), &x) in pairs {
                    *dx = k * g + kx * (x - mu) + k0;
                }
            }
        }
    });
    Ok((dx, dw, db))
}

/// The running statistics moved in place towards a batch's `mean` and biased `var`:
/// `(1 - momentum)·running + momentum·batch`, the variance made unbiased.
pub fn update_running(
    running_mean: &mut [f32],
    running_var: &mut [f32],
    mean: &[f32],
    var: &[f32],
    momentum: f32,
    a: &BatchNormArgs,
) {
    let count = a.count();
    let unbiased = count as f32 / (count.max(2) - 1) as f32;
    for (r, &m) in running_mean.iter_mut().zip(mean) {
        *r = *r * (1.0 - momentum) + m * momentum;
    }
    for (r, &v) in running_var.iter_mut().zip(var) {
        *r = *r * (1.0 - momentum) + v * (momentum * unbiased);
    }
}
