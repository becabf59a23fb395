//! im2col/col2im and 2-D pooling over NCHW planes. Each (sample, channel) plane is independent,
//! so work splits across threads by plane.

use rayon::prelude::*;

use super::pool;

use crate::backend::ConvGeom;

/// Input coordinate of output position `o`, kernel tap `k` along one axis, if inside the input.
#[inline]
fn input_coord(o: usize, k: usize, stride: usize, pad: usize, dilation: usize, size: usize) -> Option<usize> {
    let pos = (o * stride + k * dilation).checked_sub(pad)?;
    (pos < size).then_some(pos)
}

/// The output positions `lo..hi` along one axis whose tap `k` lands inside the input, so inner
/// loops run without bounds checks. Positions are monotonic in `o`, hence a single range.
#[inline]
fn valid_outputs(k: usize, stride: usize, pad: usize, dilation: usize, size: usize, out: usize) -> (usize, usize) {
    let offset = k * dilation;
    // First o with o*stride + offset >= pad.
    let lo = pad.saturating_sub(offset).div_ceil(stride).min(out);
    // First o with o*stride + offset - pad >= size.
    let hi = (size + pad).saturating_sub(offset).div_ceil(stride).clamp(lo, out);
    (lo, hi)
}

/// `[n, c, h, w]` → `[n, c*kh*kw, oh*ow]`.
pub fn im2col(x: &[f32], g: &ConvGeom) -> Vec<f32> {
    let taps = g.kernel_h * g.kernel_w;
    let spatial = g.out_h * g.out_w;
    let plane = g.in_h * g.in_w;
    // Every element is written below (padding cells with explicit zeros), so no clearing pass.
    let mut cols = pool::take(g.batch * g.channels * taps * spatial);
    cols.par_chunks_mut(taps * spatial).enumerate().for_each(|(nc, block)| {
        let src = &x[nc * plane..(nc + 1) * plane];
        for ki in 0..g.kernel_h {
            for kj in 0..g.kernel_w {
                let row = &mut block[(ki * g.kernel_w + kj) * spatial..][..spatial];
                let (lo, hi) = valid_outputs(kj, g.stride_w, g.pad_w, g.dilation_w, g.in_w, g.out_w);
                for oi in 0..g.out_h {
                    let out_row = &mut row[oi * g.out_w..(oi + 1) * g.out_w];
                    let ii = input_coord(oi, ki, g.stride_h, g.pad_h, g.dilation_h, g.in_h);
                    let (Some(ii), true) = (ii, lo < hi) else {
                        out_row.fill(0.0);
                        continue;
                    };
                    out_row[..lo].fill(0.0);
                    out_row[hi..].fill(0.0);
                    let line = &src[ii * g.in_w + lo * g.stride_w + kj * g.dilation_w - g.pad_w..];
                    let dst = &mut out_row[lo..hi];
                    if g.stride_w == 1 {
                        dst.copy_from_slice(&line[..hi - lo]);
                    } else {
                        for (d, s) in dst.iter_mut().zip(line.iter().step_by(g.stride_w)) {
                            *d = *s;
                        }
                    }
                }
            }
        }
    });
    cols
}

/// Adjoint of [`im2col`].
pub fn col2im(cols: &[f32], g: &ConvGeom) -> Vec<f32> {
    let taps = g.kernel_h * g.kernel_w;
    let spatial = g.out_h * g.out_w;
    let plane = g.in_h * g.in_w;
    let mut x = pool::filled(g.batch * g.channels * plane, 0.0);
    x.par_chunks_mut(plane).enumerate().for_each(|(nc, dst)| {
        let block = &cols[nc * taps * spatial..(nc + 1) * taps * spatial];
        for ki in 0..g.kernel_h {
            for kj in 0..g.kernel_w {
                let row = &block[(ki * g.kernel_w + kj) * spatial..][..spatial];
                let (lo, hi) = valid_outputs(kj, g.stride_w, g.pad_w, g.dilation_w, g.in_w, g.out_w);
                if lo == hi {
                    continue;
                }
                let first_ij = lo * g.stride_w + kj * g.dilation_w - g.pad_w;
                for oi in 0..g.out_h {
                    let Some(ii) = input_coord(oi, ki, g.stride_h, g.pad_h, g.dilation_h, g.in_h) else { continue };
                    let src = &row[oi * g.out_w + lo..oi * g.out_w + hi];
                    let line = &mut dst[ii * g.in_w + first_ij..];
                    for (d, s) in line.iter_mut().step_by(g.stride_w).zip(src) {
                        *d += s;
                    }
                }
            }
        }
    });
    x
}

pub fn max_pool2d(x: &[f32], g: &ConvGeom) -> (Vec<f32>, Vec<u32>) {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut out = pool::take(g.batch * g.channels * spatial);
    let mut arg = vec![u32::MAX; out.len()];
    let unpadded = g.pad_h == 0 && g.pad_w == 0;
    out.par_chunks_mut(spatial).zip(arg.par_chunks_mut(spatial)).enumerate().for_each(|(nc, (o, a))| {
        let src = &x[nc * plane..(nc + 1) * plane];
        if unpadded {
            max_pool_plane_unpadded(src, g, o, a);
        } else {
            max_pool_plane_padded(src, g, o, a);
        }
    });
    (out, arg)
}

/// Without padding every window lies inside the input: a plain scan per window. The first
/// maximum wins ties; a NaN, once seen, stays (as in PyTorch, NaN propagates).
fn max_pool_plane_unpadded(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    for oi in 0..g.out_h {
        for oj in 0..g.out_w {
            let start = oi * g.stride_h * g.in_w + oj * g.stride_w;
            let (mut best, mut best_at) = (src[start], start);
            for ki in 0..g.kernel_h {
                let row = start + ki * g.dilation_h * g.in_w;
                for kj in 0..g.kernel_w {
                    let at = row + kj * g.dilation_w;
                    let v = src[at];
                    if v > best || (v.is_nan() && !best.is_nan()) {
                        best = v;
                        best_at = at;
                    }
                }
            }
            o[oi * g.out_w + oj] = best;
            a[oi * g.out_w + oj] = best_at as u32;
        }
    }
}

/// With padding, taps outside the input are skipped; a window entirely in the padding yields
/// -inf and no argmax (`u32::MAX`, ignored by the backward).
fn max_pool_plane_padded(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    o.fill(f32::NEG_INFINITY);
    // Taps in the outer loops so each inner loop is a pass over a row of outputs; per output the
    // taps still arrive in row-major window order, so tie and NaN rules match the unpadded scan.
    for ki in 0..g.kernel_h {
        for kj in 0..g.kernel_w {
            let (lo, hi) = valid_outputs(kj, g.stride_w, g.pad_w, g.dilation_w, g.in_w, g.out_w);
            if lo == hi {
                continue;
            }
            let first_ij = lo * g.stride_w + kj * g.dilation_w - g.pad_w;
            for oi in 0..g.out_h {
                let Some(ii) = input_coord(oi, ki, g.stride_h, g.pad_h, g.dilation_h, g.in_h) else { continue };
                let base = ii * g.in_w + first_ij;
                for (j, oj) in (lo..hi).enumerate() {
                    let at = base + j * g.stride_w;
                    let v = src[at];
                    let slot = oi * g.out_w + oj;
                    if v > o[slot] || a[slot] == u32::MAX || (v.is_nan() && !o[slot].is_nan()) {
                        o[slot] = v;
                        a[slot] = at as u32;
                    }
                }
            }
        }
    }
}

pub fn max_pool2d_backward(grad: &[f32], argmax: &[u32], g: &ConvGeom) -> Vec<f32> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut dx = pool::filled(g.batch * g.channels * plane, 0.0);
    dx.par_chunks_mut(plane).enumerate().for_each(|(nc, d)| {
        let (gr, ar) = (&grad[nc * spatial..][..spatial], &argmax[nc * spatial..][..spatial]);
        for (&gv, &at) in gr.iter().zip(ar) {
            if let Some(slot) = d.get_mut(at as usize) {
                *slot += gv;
            }
        }
    });
    dx
}

/// Window of adaptive pooling output `i` over an input of `size` into `out` cells.
pub fn adaptive_window(i: usize, size: usize, out: usize) -> (usize, usize) {
    let start = i * size / out;
    let end = ((i + 1) * size).div_ceil(out);
    (start, end)
}

/// Window of output `(oi, oj)` as inclusive-exclusive input ranges and the divisor.
fn avg_window(oi: usize, oj: usize, g: &ConvGeom, adaptive: bool) -> ((usize, usize), (usize, usize), f32) {
    if adaptive {
        let (h0, h1) = adaptive_window(oi, g.in_h, g.out_h);
        let (w0, w1) = adaptive_window(oj, g.in_w, g.out_w);
        return ((h0, h1), (w0, w1), ((h1 - h0) * (w1 - w0)) as f32);
    }
    let h0 = oi * g.stride_h;
    let w0 = oj * g.stride_w;
    // Window in padded coordinates, clipped to the real input; padding counts in the divisor.
    let hs = h0.saturating_sub(g.pad_h);
    let he = (h0 + g.kernel_h).saturating_sub(g.pad_h).min(g.in_h);
    let ws = w0.saturating_sub(g.pad_w);
    let we = (w0 + g.kernel_w).saturating_sub(g.pad_w).min(g.in_w);
    ((hs, he.max(hs)), (ws, we.max(ws)), (g.kernel_h * g.kernel_w) as f32)
}

pub fn avg_pool2d(x: &[f32], g: &ConvGeom, adaptive: bool) -> Vec<f32> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut out = pool::take(g.batch * g.channels * spatial);
    out.par_chunks_mut(spatial).enumerate().for_each(|(nc, o)| {
        let src = &x[nc * plane..(nc + 1) * plane];
        for oi in 0..g.out_h {
            for oj in 0..g.out_w {
                let ((h0, h1), (w0, w1), div) = avg_window(oi, oj, g, adaptive);
                let mut sum = 0.0;
                for row in src[h0 * g.in_w..h1 * g.in_w].chunks_exact(g.in_w) {
                    sum += row[w0..w1].iter().sum::<f32>();
                }
                o[oi * g.out_w + oj] = sum / div;
            }
        }
    });
    out
}

pub fn avg_pool2d_backward(grad: &[f32], g: &ConvGeom, adaptive: bool) -> Vec<f32> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut dx = pool::filled(g.batch * g.channels * plane, 0.0);
    dx.par_chunks_mut(plane).enumerate().for_each(|(nc, d)| {
        let gr = &grad[nc * spatial..][..spatial];
        for oi in 0..g.out_h {
            for oj in 0..g.out_w {
                let ((h0, h1), (w0, w1), div) = avg_window(oi, oj, g, adaptive);
                let share = gr[oi * g.out_w + oj] / div;
                for row in d[h0 * g.in_w..h1 * g.in_w].chunks_exact_mut(g.in_w) {
                    for v in &mut row[w0..w1] {
                        *v += share;
                    }
                }
            }
        }
    });
    dx
}
