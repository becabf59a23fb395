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
use crate::backend::AttentionArgs;
use crate::Result;

/// Queries per parallel task of the forward.
const QUERY_BLOCK: usize = 32;
/// Keys per block of scores.
const KEY_BLOCK: usize = 64;

const OP: &str = "scaled_dot_product_attention";

/// `y += a · x`.
#[inline]
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += a * x;
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

/// Rows `j0 .. j0 + n` of `x [.., d]` transposed into `dst [d, n]`.
fn transpose_block(x: &[f32], d: usize, j0: usize, n: usize, dst: &mut Vec<f32>) {
    dst.clear();
    dst.resize(d * n, 0.0);
    for j in 0..n {
        let row = &x[(j0 + j) * d..(j0 + j + 1) * d];
        for (c, &value) in row.iter().enumerate() {
            dst[c * n + j] = value;
        }
    }
}

/// `out[..n] = scale · Σ_c row[c] · xt[c, ..n]` for a block transposed to `xt [d, width]`.
fn row_times_block(row: &[f32], xt: &[f32], width: usize, n: usize, scale: f32, out: &mut [f32]) {
    let out = &mut out[..n];
    out.fill(0.0);
    for (c, &r) in row.iter().enumerate() {
        axpy(out, r * scale, &xt[c * width..c * width + n]);
    }
}

/// Output `[batch, tq, d]` and log-sum-exp `[batch, tq]` of the scaled scores.
pub fn attention_forward(q: &[f32], k: &[f32], v: &[f32], a: &AttentionArgs) -> Result<(Vec<f32>, Vec<f32>)> {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let mut out = buffer_pool::zeroed(OP, a.batch * tq * d)?;
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

/// One block of queries starting at `i0` (`lse.len()` of them) over every key it sees.
fn forward_block(q: &[f32], k: &[f32], v: &[f32], i0: usize, out: &mut [f32], lse: &mut [f32], a: &AttentionArgs) {
    let (d, rows) = (a.d, lse.len());
    let mut max = vec![f32::NEG_INFINITY; rows];
    let mut sum = vec![0.0f32; rows];
    let (mut kt, mut scores) = (Vec::new(), vec![0.0f32; KEY_BLOCK]);
    let end = a.visible_keys(i0 + rows - 1);
    for j0 in (0..end).step_by(KEY_BLOCK) {
        let n = KEY_BLOCK.min(end - j0);
        transpose_block(k, d, j0, n, &mut kt);
        for r in 0..rows {
            let i = i0 + r;
            let seen = a.visible_keys(i).saturating_sub(j0).min(n);
            if seen == 0 {
                continue;
            }
            row_times_block(&q[i * d..(i + 1) * d], &kt, n, seen, a.scale, &mut scores);
            let s = &scores[..seen];
            let new_max = s.iter().fold(max[r], |m, &x| m.max(x));
            let o = &mut out[r * d..(r + 1) * d];
            if max[r] != new_max {
                // exp(-inf) = 0 drops the (empty) sum and output of a first block.
                let correction = (max[r] - new_max).exp();
                sum[r] *= correction;
                o.iter_mut().for_each(|x| *x *= correction);
                max[r] = new_max;
            }
            for (j, &s) in s.iter().enumerate() {
                let p = (s - new_max).exp();
                sum[r] += p;
                axpy(o, p, &v[(j0 + j) * d..(j0 + j + 1) * d]);
            }
        }
    }
    for r in 0..rows {
        let inv = if sum[r] > 0.0 { 1.0 / sum[r] } else { 0.0 };
        out[r * d..(r + 1) * d].iter_mut().for_each(|x| *x *= inv);
        lse[r] = if sum[r] > 0.0 { max[r] + sum[r].ln() } else { f32::NEG_INFINITY };
    }
}

/// Gradients `(dq, dk, dv)` of the forward, given its output, log-sum-exp and `dout`.
pub fn attention_backward(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
    lse: &[f32],
    dout: &[f32],
    a: &AttentionArgs,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let mut dq = buffer_pool::zeroed(OP, a.batch * tq * d)?;
    let mut dk = buffer_pool::zeroed(OP, a.batch * tk * d)?;
    let mut dv = buffer_pool::zeroed(OP, a.batch * tk * d)?;
    if dq.is_empty() || dk.is_empty() {
        return Ok((dq, dk, dv));
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
    Ok((dq, dk, dv))
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

/// With `p = exp(s - lse)` and `δ_i = Σ dout_i·out_i`: `dv_j += p·dout_i`,
/// `ds = p·(dout_i·v_j - δ_i)`, `dq_i += scale·ds·k_j`, `dk_j += scale·ds·q_i`.
fn backward_head(h: &Head, dq: &mut [f32], dk: &mut [f32], dv: &mut [f32], a: &AttentionArgs) {
    let (tq, tk, d) = (a.tq, a.tk, a.d);
    let delta: Vec<f32> = (0..tq).map(|i| dot(&h.dout[i * d..(i + 1) * d], &h.out[i * d..(i + 1) * d])).collect();
    let (mut kt, mut vt) = (Vec::new(), Vec::new());
    let (mut s, mut dp) = (vec![0.0f32; KEY_BLOCK], vec![0.0f32; KEY_BLOCK]);
    let shift = tk - tq.min(tk);
    for j0 in (0..tk).step_by(KEY_BLOCK) {
        let n = KEY_BLOCK.min(tk - j0);
        transpose_block(h.k, d, j0, n, &mut kt);
        transpose_block(h.v, d, j0, n, &mut vt);
        let first = if a.causal { j0.saturating_sub(shift) } else { 0 };
        for i in first..tq {
            let seen = a.visible_keys(i).saturating_sub(j0).min(n);
            if seen == 0 {
                continue;
            }
            let (qi, doi) = (&h.q[i * d..(i + 1) * d], &h.dout[i * d..(i + 1) * d]);
            row_times_block(qi, &kt, n, seen, a.scale, &mut s);
            row_times_block(doi, &vt, n, seen, 1.0, &mut dp);
            let dqi = &mut dq[i * d..(i + 1) * d];
            for j in 0..seen {
                let p = (s[j] - h.lse[i]).exp();
                let ds = p * (dp[j] - delta[i]) * a.scale;
                let key = (j0 + j) * d..(j0 + j + 1) * d;
                axpy(&mut dv[key.clone()], p, doi);
                axpy(&mut dk[key.clone()], ds, qi);
                axpy(dqi, ds, &h.k[key]);
            }
        }
    }
}
