//! Fused scaled dot-product attention (FlashAttention style): scores are computed one block of
//! keys at a time and folded into a running (online) softmax, so no `[tq, tk]` score matrix is
//! ever stored. The forward runs in parallel over (head, block of queries); the backward
//! recomputes the scores from `q`, `k` and the saved log-sum-exp and runs in parallel over
//! heads, each head accumulating its own `dq`, `dk`, `dv` in a fixed order (deterministic).
//!
//! Inner loops are contiguous `axpy`s (`y += a·x`) that the compiler vectorises: a block of keys
//! is transposed to `[d, keys]` so that a query's scores are `Σ_c q[c] · kᵀ[c, ..]`.

use rayon::prelude::*;

use super::buffer_pool;
use crate::backend::{AttentionArgs, AttentionRows};
use crate::Result;

/// Queries per block: a parallel task of the forward, a row block of the backward's products.
const QUERY_BLOCK: usize = 64;
/// Keys per block of scores.
const KEY_BLOCK: usize = 64;

const OP: &str = "scaled_dot_product_attention";

/// A matrix inside a slice: element `(r, c)` at `r·row + c·col`.
#[derive(Clone, Copy)]
struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row: usize,
    col: usize,
}

impl<'a> Mat<'a> {
    /// Rows `r0 .. r0 + rows` of a row-major matrix with `cols` columns.
    fn rows_of(data: &'a [f32], cols: usize, r0: usize, rows: usize) -> Self {
        Mat { data: &data[r0 * cols..(r0 + rows) * cols], rows, cols, row: cols, col: 1 }
    }

    fn t(self) -> Self {
        Mat { rows: self.cols, cols: self.rows, row: self.col, col: self.row, ..self }
    }

    /// Whether every element lies inside the slice.
    fn fits(&self) -> bool {
        self.rows == 0 || self.cols == 0 || (self.rows - 1) * self.row + (self.cols - 1) * self.col < self.data.len()
    }
}

/// `dst = alpha · a · b` (or `dst += …` with `accumulate`), `dst` row-major with row stride
/// `ld`, through `gemm` on the calling thread.
fn product(dst: &mut [f32], ld: usize, a: Mat, b: Mat, alpha: f32, accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let dst_fits = m == 0 || n == 0 || (m - 1) * ld + n <= dst.len();
    assert!(a.fits() && b.fits() && dst_fits && b.rows == k, "attention: a product outside its operands");
    // SAFETY: the assertion above keeps every element gemm reads (`a`: m×k, `b`: k×n at their
    // strides) and writes (`dst`: m×n at row stride `ld`) inside the three slices; the strides
    // are element counts of slices, so they fit an isize.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            ld as isize,
            accumulate,
            a.data.as_ptr(),
            a.col as isize,
            a.row as isize,
            b.data.as_ptr(),
            b.col as isize,
            b.row as isize,
            1.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// `e^x`, as `f32::exp` to about 2 ulp, for `x` up to 0 (0 below -87, where `e^x` is
/// subnormal), in plain arithmetic so that loops over it vectorise (Cephes' `expf`).
#[inline]
fn exp_nonpositive(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding and subtracting it rounds to an integer
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let poly = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = (poly * r * r + r + 1.0) * f32::from_bits(((n.max(-126.0) as i32 + 127) as u32) << 23);
    if x < -87.0 {
        0.0
    } else {
        e
    }
}

/// `Σ x·y` with eight partial sums, so the loop vectorises (float addition is not reordered).
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            acc[l] += a[l] * b[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Output `[batch, tq, d]` and log-sum-exp `[batch, tq]` of the scaled scores.
pub fn attention_forward(q: &[f32], k: &[f32], v: &[f32], a: &AttentionArgs) -> Result<(Vec<f32>, Vec<f32>)> {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let mut out = buffer_pool::filled(OP, a.batch * tq * d, 0.0)?;
    let mut lse = buffer_pool::zeroed(OP, a.batch * tq)?;
    if out.is_empty() || lse.is_empty() {
        lse.fill(f32::NEG_INFINITY);
        return Ok((out, lse));
    }
    out.par_chunks_mut(tq * d).zip(lse.par_chunks_mut(tq)).enumerate().for_each(|(b, (out, lse))| {
        let q = &q[b * tq * d..(b + 1) * tq * d];
        let (k, v) = (&k[b * tk * d..(b + 1) * tk * d], &v[b * tk * d..(b + 1) * tk * d]);
        out.par_chunks_mut(QUERY_BLOCK * d)
            .zip(lse.par_chunks_mut(QUERY_BLOCK))
            .enumerate()
            .for_each(|(block, (out, lse))| forward_block(q, k, v, block * QUERY_BLOCK, out, lse, a));
    });
    Ok((out, lse))
}

/// One block of queries starting at `i0` (`lse.len()` of them) over every key it sees: per
/// block of keys, scores `S = scale · Q Kᵀ`, the online softmax of each row (rescaling its
/// output and sum when its maximum grows) and `O += P V`.
fn forward_block(q: &[f32], k: &[f32], v: &[f32], i0: usize, out: &mut [f32], lse: &mut [f32], a: &AttentionArgs) {
    let (d, rows) = (a.d, lse.len());
    let mut max = vec![f32::NEG_INFINITY; rows];
    let mut sum = vec![0.0f32; rows];
    let mut scores = vec![0.0f32; rows * KEY_BLOCK];
    let queries = Mat::rows_of(q, d, i0, rows);
    let end = a.visible_keys(i0 + rows - 1);
    for j0 in (0..end).step_by(KEY_BLOCK) {
        let n = KEY_BLOCK.min(end - j0);
        product(&mut scores, KEY_BLOCK, queries, Mat::rows_of(k, d, j0, n).t(), a.scale, false);
        for r in 0..rows {
            let s = &mut scores[r * KEY_BLOCK..r * KEY_BLOCK + n];
            let seen = a.visible_keys(i0 + r).saturating_sub(j0).min(n);
            if seen == 0 {
                s.fill(0.0);
                continue;
            }
            let new_max = s[..seen].iter().fold(max[r], |m, &x| m.max(x));
            if max[r] != new_max {
                // exp(-inf) = 0 drops the (empty) sum and output of a first block.
                let correction = (max[r] - new_max).exp();
                sum[r] *= correction;
                out[r * d..(r + 1) * d].iter_mut().for_each(|x| *x *= correction);
                max[r] = new_max;
            }
            let mut total = 0.0;
            for x in s[..seen].iter_mut() {
                *x = exp_nonpositive(*x - new_max);
                total += *x;
            }
            sum[r] += total;
            s[seen..].fill(0.0);
        }
        product(
            out,
            d,
            Mat { data: &scores, rows, cols: n, row: KEY_BLOCK, col: 1 },
            Mat::rows_of(v, d, j0, n),
            1.0,
            true,
        );
    }
    for r in 0..rows {
        let inv = if sum[r] > 0.0 { 1.0 / sum[r] } else { 0.0 };
        out[r * d..(r + 1) * d].iter_mut().for_each(|x| *x *= inv);
        lse[r] = if sum[r] > 0.0 { max[r] + sum[r].ln() } else { f32::NEG_INFINITY };
    }
}

/// The `t` rows of each of the `batch` heads of a tensor laid out as `rows` (with `heads` per
/// sequence), gathered into `[batch, t, d]`: a packed layout's q, k, v or output on the CPU.
pub fn gather_rows(
    src: &[f32],
    rows: AttentionRows,
    heads: usize,
    batch: usize,
    t: usize,
    d: usize,
) -> Result<Vec<f32>> {
    let mut out = buffer_pool::take(OP, batch * t * d)?;
    if d > 0 {
        out.par_chunks_exact_mut(d).enumerate().for_each(|(r, row)| {
            let start = rows.start(r / t, heads, r % t);
            row.copy_from_slice(&src[start..start + d]);
        });
    }
    Ok(out)
}

/// The inverse of [`gather_rows`] for every part at once: writes each `[batch, t, d]` source
/// into `dst` laid out as its rows, one sequence (`outer` elements of `dst`, the same for every
/// part) per task.
pub fn scatter_rows(
    parts: &[(&[f32], AttentionRows)],
    dst: &mut [f32],
    outer: usize,
    heads: usize,
    t: usize,
    d: usize,
) {
    if outer == 0 || d == 0 {
        return;
    }
    dst.par_chunks_mut(outer).enumerate().for_each(|(n, sequence)| {
        for (src, rows) in parts {
            for h in 0..heads {
                for i in 0..t {
                    let from = ((n * heads + h) * t + i) * d;
                    let to = rows.start(n * heads + h, heads, i) - n * outer;
                    sequence[to..to + d].copy_from_slice(&src[from..from + d]);
                }
            }
        }
    });
}

/// Gradients `[dq | dk | dv]` of the forward (contiguous, one after the other), given its output,
/// log-sum-exp and `dout`, all `[batch, t, d]` contiguous.
pub fn attention_backward(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
    lse: &[f32],
    dout: &[f32],
    a: &AttentionArgs,
) -> Result<Vec<f32>> {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let mut grads = buffer_pool::filled(OP, a.batch * (tq + 2 * tk) * d, 0.0)?;
    let (dq, dkv) = grads.split_at_mut(a.batch * tq * d);
    let (dk, dv) = dkv.split_at_mut(a.batch * tk * d);
    if dq.is_empty() || dk.is_empty() {
        return Ok(grads);
    }
    let per_head = dq.par_chunks_mut(tq * d).zip(dk.par_chunks_mut(tk * d).zip(dv.par_chunks_mut(tk * d)));
    per_head.enumerate().for_each(|(b, (dq, (dk, dv)))| {
        let (qs, ks) = (b * tq * d..(b + 1) * tq * d, b * tk * d..(b + 1) * tk * d);
        let head = Head {
            q: &q[qs.clone()],
            k: &k[ks.clone()],
            v: &v[ks],
            out: &out[qs.clone()],
            dout: &dout[qs],
            lse: &lse[b * tq..(b + 1) * tq],
        };
        backward_head(&head, dq, dk, dv, a);
    });
    Ok(grads)
}

/// One head's forward inputs and outputs, and the output's gradient.
struct Head<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    out: &'a [f32],
    dout: &'a [f32],
    lse: &'a [f32],
}

/// Per block of keys and block of queries that sees it: `P = exp(scale · Q Kᵀ - lse)`,
/// `dV += Pᵀ dO`, `dS = P ∘ (dO Vᵀ - δ) · scale` with `δ_i = dout_i · out_i`, `dK += dSᵀ Q`,
/// `dQ += dS K`.
fn backward_head(h: &Head, dq: &mut [f32], dk: &mut [f32], dv: &mut [f32], a: &AttentionArgs) {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let delta: Vec<f32> = (0..tq).map(|i| dot(&h.dout[i * d..(i + 1) * d], &h.out[i * d..(i + 1) * d])).collect();
    let mut p = vec![0.0f32; QUERY_BLOCK * KEY_BLOCK];
    let mut ds = vec![0.0f32; QUERY_BLOCK * KEY_BLOCK];
    let shift = tk - tq.min(tk);
    for j0 in (0..tk).step_by(KEY_BLOCK) {
        let n = KEY_BLOCK.min(tk - j0);
        let (keys, values) = (Mat::rows_of(h.k, d, j0, n), Mat::rows_of(h.v, d, j0, n));
        let first = if a.causal { j0.saturating_sub(shift) } else { 0 };
        for i0 in (first..tq).step_by(QUERY_BLOCK) {
            let rows = QUERY_BLOCK.min(tq - i0);
            let (queries, grads) = (Mat::rows_of(h.q, d, i0, rows), Mat::rows_of(h.dout, d, i0, rows));
            product(&mut p, KEY_BLOCK, queries, keys.t(), a.scale, false);
            product(&mut ds, KEY_BLOCK, grads, values.t(), 1.0, false);
            for r in 0..rows {
                let i = i0 + r;
                let seen = a.visible_keys(i).saturating_sub(j0).min(n);
                let (pr, dsr) = (&mut p[r * KEY_BLOCK..r * KEY_BLOCK + n], &mut ds[r * KEY_BLOCK..r * KEY_BLOCK + n]);
                for (x, g) in pr[..seen].iter_mut().zip(dsr[..seen].iter_mut()) {
                    *x = exp_nonpositive(*x - h.lse[i]);
                    *g = *x * (*g - delta[i]) * a.scale;
                }
                pr[seen..].fill(0.0);
                dsr[seen..].fill(0.0);
            }
            let p_block = Mat { data: &p, rows, cols: n, row: KEY_BLOCK, col: 1 };
            let ds_block = Mat { data: &ds, rows, cols: n, row: KEY_BLOCK, col: 1 };
            product(&mut dv[j0 * d..], d, p_block.t(), grads, 1.0, true);
            product(&mut dk[j0 * d..], d, ds_block.t(), queries, 1.0, true);
            product(&mut dq[i0 * d..], d, ds_block, keys, 1.0, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::exp_nonpositive;

    #[test]
    fn the_vectorisable_exp_matches_the_standard_one() {
        let mut x = 0.0f32;
        while x > -100.0 {
            let (got, want) = (exp_nonpositive(x), x.exp());
            if x >= -87.0 {
                assert!((got - want).abs() <= 4.0 * f32::EPSILON * want, "{x}: {got} vs {want}");
            } else {
                assert!(got == 0.0 && want < 1.7e-38, "{x}: {got} vs {want}");
            }
            x -= 0.0137;
        }
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }
}
