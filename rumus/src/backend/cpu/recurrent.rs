//! LSTM and GRU cells over whole sequences (see [`RecurrentArgs`] for the layouts): the
//! sequences of a batch run in parallel, the steps of one sequence in order. Each step is the
//! recurrent mat-vec plus the gates and the state update (forward), or the gates' backward plus
//! the mat-vec that carries the hidden state's gradient one step back (backward).

use rayon::prelude::*;

use super::buffer_pool;
use super::elementwise::sigmoid;
use crate::backend::{RecurrentArgs, RecurrentCell};
use crate::Result;

const OP: &str = "recurrent";

/// What the forward reads, each as [`RecurrentArgs`] lays it out.
pub struct ForwardInputs<'a> {
    pub xproj: &'a [f32],
    pub w_hh_t: &'a [f32],
    pub b_hh: &'a [f32],
    pub h0: &'a [f32],
    /// LSTM only.
    pub c0: Option<&'a [f32]>,
}

/// What the backward reads, each as [`RecurrentArgs`] lays it out.
pub struct BackwardInputs<'a> {
    pub dpacked: &'a [f32],
    pub saved: &'a [f32],
    pub packed: &'a [f32],
    pub w_hh: &'a [f32],
    pub h0: &'a [f32],
    /// LSTM only.
    pub c0: Option<&'a [f32]>,
}

/// `acc[g] = b[g] + Σ_k h[k]·w_t[k, g]` with `w_t [H, G·H]`.
fn recurrent_matvec(acc: &mut [f32], b: &[f32], h: &[f32], w_t: &[f32]) {
    acc.copy_from_slice(b);
    let width = acc.len();
    for (k, &hk) in h.iter().enumerate() {
        let row = &w_t[k * width..(k + 1) * width];
        for (a, &w) in acc.iter_mut().zip(row) {
            *a += hk * w;
        }
    }
}

/// `out[j] += Σ_g dg[g]·w[g, j]` with `w [G·H, H]`.
fn transposed_matvec(out: &mut [f32], dg: &[f32], w: &[f32]) {
    let hidden = out.len();
    for (g, &d) in dg.iter().enumerate() {
        let row = &w[g * hidden..(g + 1) * hidden];
        for (o, &w) in out.iter_mut().zip(row) {
            *o += d * w;
        }
    }
}

/// `(packed, saved)`: the outputs at every step then the final states, and the values the
/// backward needs.
pub fn forward(x: &ForwardInputs<'_>, a: &RecurrentArgs) -> Result<(Vec<f32>, Vec<f32>)> {
    let (h, t_len, width) = (a.hidden, a.steps, a.width());
    let rows = t_len + a.cell.states();
    let sv = a.cell.saved() * h;
    let mut packed = buffer_pool::zeroed(OP, a.packed_len())?;
    let mut saved = buffer_pool::zeroed(OP, a.saved_len())?;
    let per_batch = packed.par_chunks_mut(rows * h).zip(saved.par_chunks_mut(t_len * sv)).enumerate();
    per_batch.for_each(|(b, (out, sav))| {
        let mut acc = vec![0.0f32; width];
        let mut h_prev = x.h0[b * h..(b + 1) * h].to_vec();
        let mut c_prev = x.c0.map(|c| c[b * h..(b + 1) * h].to_vec()).unwrap_or_default();
        for s in 0..t_len {
            let t = a.time(s);
            let xp = &x.xproj[(b * t_len + t) * width..(b * t_len + t + 1) * width];
            recurrent_matvec(&mut acc, x.b_hh, &h_prev, x.w_hh_t);
            let sv_t = &mut sav[t * sv..(t + 1) * sv];
            let y = &mut out[t * h..(t + 1) * h];
            match a.cell {
                RecurrentCell::Lstm => {
                    for j in 0..h {
                        let i = sigmoid(xp[j] + acc[j]);
                        let f = sigmoid(xp[h + j] + acc[h + j]);
                        let g = (xp[2 * h + j] + acc[2 * h + j]).tanh();
                        let o = sigmoid(xp[3 * h + j] + acc[3 * h + j]);
                        let c = f * c_prev[j] + i * g;
                        y[j] = o * c.tanh();
                        for (q, v) in [i, f, g, o, c].into_iter().enumerate() {
                            sv_t[q * h + j] = v;
                        }
                        c_prev[j] = c;
                    }
                }
                RecurrentCell::Gru => {
                    for j in 0..h {
                        let r = sigmoid(xp[j] + acc[j]);
                        let z = sigmoid(xp[h + j] + acc[h + j]);
                        let hn = acc[2 * h + j];
                        let n = (xp[2 * h + j] + r * hn).tanh();
                        y[j] = (1.0 - z) * n + z * h_prev[j];
                        for (q, v) in [r, z, n, hn].into_iter().enumerate() {
                            sv_t[q * h + j] = v;
                        }
                    }
                }
            }
            h_prev.copy_from_slice(y);
        }
        out[t_len * h..(t_len + 1) * h].copy_from_slice(&h_prev);
        if a.cell == RecurrentCell::Lstm {
            out[(t_len + 1) * h..(t_len + 2) * h].copy_from_slice(&c_prev);
        }
    });
    Ok((packed, saved))
}

/// `(dgx, dgh, dh0, dc0)`: the gradients of the gates' pre-activations on the input side
/// `[batch, steps, G·hidden]` and on the recurrent side (GRU only: the LSTM's are the same),
/// and those of the initial states.
#[allow(clippy::type_complexity)]
pub fn backward(
    x: &BackwardInputs<'_>,
    a: &RecurrentArgs,
) -> Result<(Vec<f32>, Option<Vec<f32>>, Vec<f32>, Option<Vec<f32>>)> {
    let (h, t_len, width) = (a.hidden, a.steps, a.width());
    let rows = t_len + a.cell.states();
    let sv = a.cell.saved() * h;
    let lstm = a.cell == RecurrentCell::Lstm;
    let mut dgx = buffer_pool::zeroed(OP, a.projection_len())?;
    let mut dgh = if lstm { Vec::new() } else { buffer_pool::zeroed(OP, a.projection_len())? };
    let mut dh0 = buffer_pool::zeroed(OP, a.batch * h)?;
    let mut dc0 = if lstm { buffer_pool::zeroed(OP, a.batch * h)? } else { Vec::new() };
    let dgh_rows: Vec<&mut [f32]> = if lstm {
        (0..a.batch).map(|_| <&mut [f32]>::default()).collect()
    } else {
        dgh.chunks_mut(t_len * width).collect()
    };
    let dc0_rows: Vec<&mut [f32]> =
        if lstm { dc0.chunks_mut(h).collect() } else { (0..a.batch).map(|_| <&mut [f32]>::default()).collect() };
    let per_batch = dgx.par_chunks_mut(t_len * width).zip(dh0.par_chunks_mut(h)).zip(dgh_rows).zip(dc0_rows);
    per_batch.enumerate().for_each(|(b, (((dgx, dh), dgh), dc_out))| {
        let dout = &x.dpacked[b * rows * h..(b + 1) * rows * h];
        let sav = &x.saved[b * t_len * sv..(b + 1) * t_len * sv];
        dh.copy_from_slice(&dout[t_len * h..(t_len + 1) * h]);
        let mut dc = if lstm { dout[(t_len + 1) * h..(t_len + 2) * h].to_vec() } else { Vec::new() };
        for s in (0..t_len).rev() {
            let t = a.time(s);
            let sv_t = &sav[t * sv..(t + 1) * sv];
            let dy = &dout[t * h..(t + 1) * h];
            let dg = &mut dgx[t * width..(t + 1) * width];
            if lstm {
                let c_prev: &[f32] = if s == 0 {
                    x.c0.map_or(&[][..], |c| &c[b * h..(b + 1) * h])
                } else {
                    let tp = a.time(s - 1);
                    &sav[tp * sv + 4 * h..tp * sv + 5 * h]
                };
                for j in 0..h {
                    let (i, f, g, o, c) = (sv_t[j], sv_t[h + j], sv_t[2 * h + j], sv_t[3 * h + j], sv_t[4 * h + j]);
                    let dht = dh[j] + dy[j];
                    let tc = c.tanh();
                    let dct = dc[j] + dht * o * (1.0 - tc * tc);
                    dg[j] = dct * g * i * (1.0 - i);
                    dg[h + j] = dct * c_prev[j] * f * (1.0 - f);
                    dg[2 * h + j] = dct * i * (1.0 - g * g);
                    dg[3 * h + j] = dht * tc * o * (1.0 - o);
                    dc[j] = dct * f;
                    dh[j] = 0.0;
                }
                transposed_matvec(dh, dg, x.w_hh);
            } else {
                let h_prev: &[f32] = if s == 0 {
                    &x.h0[b * h..(b + 1) * h]
                } else {
                    let tp = a.time(s - 1);
                    &x.packed[(b * rows + tp) * h..(b * rows + tp + 1) * h]
                };
                let dgh = &mut dgh[t * width..(t + 1) * width];
                for j in 0..h {
                    let (r, z, n, hn) = (sv_t[j], sv_t[h + j], sv_t[2 * h + j], sv_t[3 * h + j]);
                    let dht = dh[j] + dy[j];
                    let dn = dht * (1.0 - z) * (1.0 - n * n);
                    let dr = dn * hn * r * (1.0 - r);
                    let dz = dht * (h_prev[j] - n) * z * (1.0 - z);
                    (dg[j], dg[h + j], dg[2 * h + j]) = (dr, dz, dn);
                    (dgh[j], dgh[h + j], dgh[2 * h + j]) = (dr, dz, dn * r);
                    dh[j] = dht * z;
                }
                transposed_matvec(dh, dgh, x.w_hh);
            }
        }
        if lstm {
            dc_out.copy_from_slice(&dc);
        }
    });
    Ok((dgx, (!lstm).then_some(dgh), dh0, lstm.then_some(dc0)))
}
