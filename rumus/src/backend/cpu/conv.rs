//! im2col/col2im and 2-D pooling over NCHW planes. Each (sample, channel) plane is independent,
//! so work splits across threads by plane.

use rayon::prelude::*;

use super::parallel::PAR_THRESHOLD;
use super::{buffer_pool, isa, max_pool_2x2};

use crate::backend::ConvGeom;
use crate::Result;

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
pub fn im2col(x: &[f32], g: &ConvGeom) -> Result<Vec<f32>> {
    let taps = g.kernel_h * g.kernel_w;
    let spatial = g.out_h * g.out_w;
    let plane = g.in_h * g.in_w;
    // Every element is written below (padding cells with explicit zeros), so no clearing pass.
    let mut cols = buffer_pool::take("im2col", g.batch * g.channels * taps * spatial)?;
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
    Ok(cols)
}

/// Adjoint of [`im2col`].
pub fn col2im(cols: &[f32], g: &ConvGeom) -> Result<Vec<f32>> {
    let taps = g.kernel_h * g.kernel_w;
    let spatial = g.out_h * g.out_w;
    let plane = g.in_h * g.in_w;
    let mut x = buffer_pool::filled("col2im", g.batch * g.channels * plane, 0.0)?;
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
                    if g.stride_w == 1 {
                        // Contiguous: a plain zip the compiler vectorises (StepBy does not).
                        line[..src.len()].iter_mut().zip(src).for_each(|(d, s)| *d += s);
                    } else {
                        line.iter_mut().step_by(g.stride_w).zip(src).for_each(|(d, s)| *d += s);
                    }
                }
            }
        }
    });
    Ok(x)
}

pub fn max_pool2d(x: &[f32], g: &ConvGeom) -> Result<(Vec<f32>, Vec<u32>)> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut out = buffer_pool::take("max_pool2d", g.batch * g.channels * spatial)?;
    let unpadded = g.pad_h == 0 && g.pad_w == 0;
    // Only the padded scan reads the argmaxes before writing them (u32::MAX: none yet).
    let mut arg = if unpadded {
        buffer_pool::zeroed("max_pool2d", out.len())?
    } else {
        buffer_pool::filled_with("max_pool2d", out.len(), u32::MAX)?
    };
    let (two_by_two, isa) = (max_pool_2x2::applies(g), isa::isa());
    let kernel = |(nc, (o, a)): (usize, (&mut [f32], &mut [u32]))| {
        let src = &x[nc * plane..(nc + 1) * plane];
        if two_by_two {
            max_pool_2x2::forward_plane(isa, src, g, o, a);
        } else if unpadded {
            max_pool_plane_unpadded(src, g, o, a);
        } else {
            max_pool_plane_padded(src, g, o, a);
        }
    };
    let spatial = spatial.max(1);
    if x.len() < PAR_THRESHOLD {
        out.chunks_mut(spatial).zip(arg.chunks_mut(spatial)).enumerate().for_each(kernel);
    } else {
        let planes_per_task = (PAR_THRESHOLD / plane.max(1)).max(1);
        let planes = out.par_chunks_mut(spatial).zip(arg.par_chunks_mut(spatial));
        planes.with_min_len(planes_per_task).enumerate().for_each(kernel);
    }
    Ok((out, arg))
}

/// Without padding every window lies inside the input. Taps run in the outer loops so each
/// inner loop is a branch-free pass over a row of outputs (selects, not branches: on real
/// activations `v > best` is a coin flip, and mispredictions would cost more than the scan).
/// Per output the taps arrive in row-major window order: the first maximum wins ties, and a NaN,
/// once seen, stays (NaN propagates, as in PyTorch).
fn max_pool_plane_unpadded(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    for (ki, kj) in (0..g.kernel_h).flat_map(|ki| (0..g.kernel_w).map(move |kj| (ki, kj))) {
        for oi in 0..g.out_h {
            let base = (oi * g.stride_h + ki * g.dilation_h) * g.in_w + kj * g.dilation_w;
            let (orow, arow) = (&mut o[oi * g.out_w..][..g.out_w], &mut a[oi * g.out_w..][..g.out_w]);
            if ki == 0 && kj == 0 {
                for (oj, (o, a)) in orow.iter_mut().zip(arow.iter_mut()).enumerate() {
                    let at = base + oj * g.stride_w;
                    (*o, *a) = (src[at], at as u32);
                }
                continue;
            }
            for (oj, (o, a)) in orow.iter_mut().zip(arow.iter_mut()).enumerate() {
                let at = base + oj * g.stride_w;
                let v = src[at];
                let take = (v > *o) | (v.is_nan() & !o.is_nan());
                *o = if take { v } else { *o };
                *a = if take { at as u32 } else { *a };
            }
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
                    let take = (v > o[slot]) | (a[slot] == u32::MAX) | (v.is_nan() & !o[slot].is_nan());
                    o[slot] = if take { v } else { o[slot] };
                    a[slot] = if take { at as u32 } else { a[slot] };
                }
            }
        }
    }
}

pub fn max_pool2d_backward(grad: &[f32], argmax: &[u32], g: &ConvGeom) -> Result<Vec<f32>> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let (two_by_two, isa) = (max_pool_2x2::applies(g), isa::isa());
    // The 2×2 kernel writes every cell of a plane; the scatter adds onto zeros.
    let len = g.batch * g.channels * plane;
    let mut dx =
        if two_by_two { buffer_pool::take("max_pool2d", len)? } else { buffer_pool::filled("max_pool2d", len, 0.0)? };
    let kernel = |(nc, d): (usize, &mut [f32])| {
        let (gr, ar) = (&grad[nc * spatial..][..spatial], &argmax[nc * spatial..][..spatial]);
        if two_by_two {
            if max_pool_2x2::backward_plane(isa, gr, ar, g, d) {
                return;
            }
            d.fill(0.0);
        }
        for (&gv, &at) in gr.iter().zip(ar) {
            if let Some(slot) = d.get_mut(at as usize) {
                *slot += gv;
            }
        }
    };
    let plane = plane.max(1);
    if dx.len() < PAR_THRESHOLD {
        dx.chunks_mut(plane).enumerate().for_each(kernel);
    } else {
        let planes_per_task = (PAR_THRESHOLD / plane).max(1);
        dx.par_chunks_mut(plane).with_min_len(planes_per_task).enumerate().for_each(kernel);
    }
    Ok(dx)
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

pub fn avg_pool2d(x: &[f32], g: &ConvGeom, adaptive: bool) -> Result<Vec<f32>> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut out = buffer_pool::take("avg_pool2d", g.batch * g.channels * spatial)?;
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
    Ok(out)
}

pub fn avg_pool2d_backward(grad: &[f32], g: &ConvGeom, adaptive: bool) -> Result<Vec<f32>> {
    let plane = g.in_h * g.in_w;
    let spatial = g.out_h * g.out_w;
    let mut dx = buffer_pool::filled("avg_pool2d", g.batch * g.channels * plane, 0.0)?;
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
    Ok(dx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(kernel: usize, stride: usize) -> ConvGeom {
        ConvGeom::square(1, 1, (9, 9), kernel, stride, 0, 1).unwrap()
    }

    #[test]
    fn max_pool_scans_agree_on_ties_and_nan() {
        // Few distinct values make ties common; a few NaNs must propagate with the same index.
        let src: Vec<f32> =
            (0..81u32).map(|i| if i % 17 == 5 { f32::NAN } else { (crate::rng::pcg_hash(i) % 4) as f32 }).collect();
        for (kernel, stride) in [(2, 2), (3, 2), (2, 1)] {
            let g = geom(kernel, stride);
            let n = g.out_h * g.out_w;
            let (mut o1, mut a1) = (vec![0.0; n], vec![0; n]);
            let (mut o2, mut a2) = (vec![0.0; n], vec![u32::MAX; n]);
            max_pool_plane_unpadded(&src, &g, &mut o1, &mut a1);
            max_pool_plane_padded(&src, &g, &mut o2, &mut a2);
            assert_eq!(a1, a2, "kernel {kernel} stride {stride}");
            for (x, y) in o1.iter().zip(&o2) {
                assert!(x == y || (x.is_nan() && y.is_nan()));
            }
            if (kernel, stride) == (2, 2) {
                // The general scan against a direct tap loop in window order.
                let (mut o3, mut a3) = (vec![0.0; n], vec![0; n]);
                for (ki, kj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    for oi in 0..g.out_h {
                        for oj in 0..g.out_w {
                            let at = (oi * 2 + ki) * 9 + oj * 2 + kj;
                            let slot = oi * g.out_w + oj;
                            let v = src[at];
                            if (ki, kj) == (0, 0) || v > o3[slot] || (v.is_nan() && !o3[slot].is_nan()) {
                                (o3[slot], a3[slot]) = (v, at as u32);
                            }
                        }
                    }
                }
                assert_eq!(a1, a3);
            }
        }
    }
}
