//! Stride-1 convolution as im2col + gemm over "shifted planes", a few samples at a time.
//!
//! With stride 1, the values kernel tap `(ki, kj)` sees are the (zero-padded) input plane shifted
//! by `ki·dh` rows and `kj·dw` columns. If every output row is computed at the padded input's
//! full width `wp` (the last `wp - out_w` columns of each row are junk, dropped afterwards), an
//! im2col row is one contiguous slice of the padded plane: one `memcpy` instead of a short copy
//! per output row, which dominated the classic im2col on small images (LeNet's rows are 10 and
//! 28 wide). The gemm does `wp / out_w` more work (1.14× and 1.4× in LeNet), far less than the
//! copies saved.
//!
//! Samples go in chunks whose columns (`[c·kh·kw, samples·oh·wp]`, so each group is one gemm over
//! the whole chunk) fit in L2; the backward unfolds again rather than keeping the batch's
//! columns alive. Chunks depend on the geometry only, never on the thread count, so results are
//! the same on any number of threads.
//!
//! The weight gradient needs no full columns: the column rows of taps `(c, ki, 0..kw)` are one
//! kernel-row slice read at offsets `kj·dw`, so it copies one row per `(c, ki)` and gives gemm
//! the `kw` tap rows in place, at a row stride of `dw` (one product per kernel row).

use rayon::prelude::*;

use super::matmul::gemm_into;
use super::{buffer_pool, conv2d_direct, reduce};
use crate::backend::{Conv2dArgs, Conv2dGrads, Conv2dWanted, MatrixLayout};
use crate::Result;

/// Column elements per chunk (256 KiB): an eighth of a core's L2, leaving room for the chunk's
/// output or gradient block and gemm's packed panels. Small chunks also balance the threads at
/// small batches (LeNet at batch 64: 22-32 chunks per layer); 512 KiB was 9% slower there and
/// no faster at batch 256.
const CHUNK_COLUMN_ELEMS: usize = 64 * 1024;

/// Whether [`conv2d`] handles this convolution (the shifted-plane trick needs stride 1).
pub fn supports(a: &Conv2dArgs) -> bool {
    (a.geom.stride_h, a.geom.stride_w) == (1, 1)
}

/// Sizes derived from [`Conv2dArgs`].
struct Dims {
    a: Conv2dArgs,
    taps: usize,
    /// Input plane `h·w`.
    plane: usize,
    /// Padded plane width and size.
    wp: usize,
    padded_plane: usize,
    /// Output positions per sample at full padded width: `oh·wp`.
    ext: usize,
    /// Junk at the end of the last extended row that the shifted slices cannot reach.
    tail: usize,
    /// Column rows (and weight columns) of one group: `c/groups · kh·kw`.
    group_rows: usize,
    /// Output channels of one group.
    group_outs: usize,
    /// Samples per chunk.
    chunk: usize,
    /// gemm threads per product: all of them when there are too few chunks to go round.
    gemm_threads: usize,
}

impl Dims {
    /// `budget`: column elements per chunk (tests pass small ones to get many chunks).
    fn new(a: &Conv2dArgs, budget: usize) -> Self {
        let g = &a.geom;
        let taps = g.kernel_h * g.kernel_w;
        let wp = g.in_w + 2 * g.pad_w;
        let ext = g.out_h * wp;
        let chunk = (budget / (g.channels * taps * ext).max(1)).clamp(1, g.batch.max(1));
        let threads = rayon::current_num_threads();
        Dims {
            a: *a,
            taps,
            plane: g.in_h * g.in_w,
            wp,
            padded_plane: (g.in_h + 2 * g.pad_h) * wp,
            ext,
            tail: wp - g.out_w,
            group_rows: g.channels / a.groups * taps,
            group_outs: a.out_channels / a.groups,
            chunk,
            gemm_threads: if g.batch.div_ceil(chunk) < threads { threads } else { 1 },
        }
    }

    /// Offset of tap `t` in the padded plane.
    fn shift(&self, t: usize) -> usize {
        let g = &self.a.geom;
        (t / g.kernel_w) * g.dilation_h * self.wp + (t % g.kernel_w) * g.dilation_w
    }

    /// Copies input plane `src` into the interior of the zero-bordered `padded`.
    fn pad_into(&self, src: &[f32], padded: &mut [f32]) {
        let g = &self.a.geom;
        for (i, row) in src.chunks_exact(g.in_w).enumerate() {
            padded[(i + g.pad_h) * self.wp + g.pad_w..][..g.in_w].copy_from_slice(row);
        }
    }

    /// Whether the convolution pads its input (then planes are read through [`Dims::pad_into`]).
    fn pads(&self) -> bool {
        self.a.geom.pad_h > 0 || self.a.geom.pad_w > 0
    }

    /// The padded plane of channel `c` of `sample` in `x`: the input's own plane without padding,
    /// else its copy into `padded` (a zero-bordered buffer of `padded_plane` values).
    fn input_plane<'a>(&self, x: &'a [f32], sample: usize, c: usize, padded: &'a mut [f32]) -> &'a [f32] {
        let src = &x[(sample * self.a.geom.channels + c) * self.plane..][..self.plane];
        if self.pads() {
            self.pad_into(src, padded);
            padded
        } else {
            src
        }
    }

    /// Row-major `rows×cols` matrix at `offset` (`transposed`: its transpose).
    fn matrix(offset: usize, cols: usize, transposed: bool) -> MatrixLayout {
        let (row_stride, col_stride) = if transposed { (1, cols) } else { (cols, 1) };
        MatrixLayout { offset, batch_stride: 0, row_stride, col_stride }
    }
}

/// Columns `[c·kh·kw, samples·ext]` of samples `first..first + samples` (a pooled buffer).
/// Junk columns hold input values (or zeros); with `clean` they are all zeroed, so that a
/// non-finite input cannot reach a product through them.
fn unfold_chunk(x: &[f32], d: &Dims, first: usize, samples: usize, clean: bool) -> Result<Vec<f32>> {
    let g = &d.a.geom;
    let width = samples * d.ext;
    let len = d.ext - d.tail;
    let mut cols = buffer_pool::take("conv2d", g.channels * d.taps * width)?;
    let mut padded = buffer_pool::zeroed("conv2d", if d.pads() { d.padded_plane } else { 0 })?;
    for b in 0..samples {
        for c in 0..g.channels {
            let plane = d.input_plane(x, first + b, c, &mut padded);
            for t in 0..d.taps {
                let row = &mut cols[(c * d.taps + t) * width + b * d.ext..][..d.ext];
                let shift = d.shift(t);
                row[..len].copy_from_slice(&plane[shift..shift + len]);
                row[len..].fill(0.0);
                if clean {
                    for junk in row.chunks_exact_mut(d.wp) {
                        junk[g.out_w..].fill(0.0);
                    }
                }
            }
        }
    }
    Ok(cols)
}

/// Kernel-row columns of samples `first..first + samples`, for the weight gradient: row
/// `(c, ki)` holds, sample after sample, the `ext` padded-plane values from row `ki·dh` on, then
/// `(kw - 1)·dw` zeros. The column row of tap `(c, ki, kj)` is this row read from `kj·dw` on (an
/// offset slice the gemm reads in place), so only one row in `kw` is copied. Junk columns read
/// the next padded row (or sample): finite values that meet zero gradients, so the caller uses
/// [`unfold_chunk`] with `clean` instead when an input is not finite. Returns the buffer and its
/// row length.
fn unfold_kernel_rows(x: &[f32], d: &Dims, first: usize, samples: usize) -> Result<(Vec<f32>, usize)> {
    let g = &d.a.geom;
    let width = samples * d.ext;
    let stride = width + (g.kernel_w - 1) * g.dilation_w;
    let mut rows = buffer_pool::take("conv2d", g.channels * g.kernel_h * stride)?;
    let mut padded = buffer_pool::zeroed("conv2d", if d.pads() { d.padded_plane } else { 0 })?;
    for c in 0..g.channels {
        for b in 0..samples {
            let plane = d.input_plane(x, first + b, c, &mut padded);
            for ki in 0..g.kernel_h {
                // From padded row ki·dh at least out_h rows remain, so `ext` values are there.
                let dst = &mut rows[(c * g.kernel_h + ki) * stride + b * d.ext..][..d.ext];
                dst.copy_from_slice(&plane[ki * g.dilation_h * d.wp..][..d.ext]);
            }
        }
        for ki in 0..g.kernel_h {
            rows[(c * g.kernel_h + ki) * stride + width..][..stride - width].fill(0.0);
        }
    }
    Ok((rows, stride))
}

/// Forward: `[n, c, h, w]` with weight `[o, c/groups, kh, kw]` and an optional bias `[o]` →
/// `[n, o, oh, ow]`.
pub fn conv2d(x: &[f32], weight: &[f32], bias: Option<&[f32]>, a: &Conv2dArgs) -> Result<Vec<f32>> {
    if conv2d_direct::supports(a) {
        return conv2d_direct::conv2d(x, weight, bias, a);
    }
    forward(x, weight, bias, a, CHUNK_COLUMN_ELEMS)
}

/// Backward: the gradients in `wanted`.
pub fn conv2d_backward(
    x: &[f32],
    weight: &[f32],
    grad: &[f32],
    a: &Conv2dArgs,
    wanted: Conv2dWanted,
) -> Result<Conv2dGrads<Vec<f32>>> {
    backward(x, weight, grad, a, wanted, CHUNK_COLUMN_ELEMS, conv2d_direct::supports(a))
}

fn forward(x: &[f32], weight: &[f32], bias: Option<&[f32]>, a: &Conv2dArgs, budget: usize) -> Result<Vec<f32>> {
    let d = Dims::new(a, budget);
    let g = &a.geom;
    let per_sample = a.out_channels * g.out_h * g.out_w;
    let mut out = buffer_pool::take("conv2d", g.batch * per_sample)?;
    if out.is_empty() {
        return Ok(out);
    }
    out.par_chunks_mut(d.chunk * per_sample).enumerate().try_for_each(|(ci, out_chunk)| {
        let samples = out_chunk.len() / per_sample;
        let width = samples * d.ext;
        let cols = unfold_chunk(x, &d, ci * d.chunk, samples, false)?;
        let mut y = buffer_pool::take("conv2d", a.out_channels * width)?;
        for gi in 0..a.groups {
            let w = Dims::matrix(gi * d.group_outs * d.group_rows, d.group_rows, false);
            let c = Dims::matrix(gi * d.group_rows * width, width, false);
            let dst = &mut y[gi * d.group_outs * width..];
            gemm_into(dst, weight, &w, &cols, &c, (d.group_outs, d.group_rows, width), d.gemm_threads)?;
        }
        // [o, samples, oh, wp] → [samples, o, oh, ow], dropping the junk columns and adding the
        // bias on the way (a pass of its own over the output otherwise).
        for (b, out_b) in out_chunk.chunks_exact_mut(per_sample).enumerate() {
            for (o, out_bo) in out_b.chunks_exact_mut(g.out_h * g.out_w).enumerate() {
                let src = &y[o * width + b * d.ext..][..d.ext];
                for (dst, src) in out_bo.chunks_exact_mut(g.out_w).zip(src.chunks_exact(d.wp)) {
                    match bias {
                        Some(bias) => dst.iter_mut().zip(src).for_each(|(d, s)| *d = s + bias[o]),
                        None => dst.copy_from_slice(&src[..g.out_w]),
                    }
                }
            }
        }
        buffer_pool::give_back(cols);
        buffer_pool::give_back(y);
        Ok(())
    })?;
    Ok(out)
}

fn backward(
    x: &[f32],
    weight: &[f32],
    grad: &[f32],
    a: &Conv2dArgs,
    wanted: Conv2dWanted,
    budget: usize,
    direct: bool,
) -> Result<Conv2dGrads<Vec<f32>>> {
    let d = Dims::new(a, budget);
    // With few channels the input gradient is summed directly (`conv2d_direct`), without the
    // columns' gradient and its scatter back.
    let direct_dx = (direct && wanted.x).then(|| conv2d_direct::InputGrad::new(weight, a));
    let g = &a.geom;
    let n = g.batch;
    let (out_plane, per_sample) = (g.out_h * g.out_w, g.channels * d.plane);
    let backward_chunk = |ci: usize, mut dx: Option<&mut [f32]>| {
        let (first, samples) = (ci * d.chunk, d.chunk.min(n - ci * d.chunk));
        let width = samples * d.ext;
        // The output gradient as [o, samples, oh, wp] with zeros in the junk columns, matching
        // the columns; the zeros keep junk out of both products. The bias gradient (this
        // chunk's share) is summed on the way.
        let mut gy = buffer_pool::take("conv2d", a.out_channels * width)?;
        let mut db = wanted.bias.then(|| buffer_pool::zeroed("conv2d", a.out_channels)).transpose()?;
        for b in 0..samples {
            for o in 0..a.out_channels {
                let src = &grad[((first + b) * a.out_channels + o) * out_plane..][..out_plane];
                let dst = &mut gy[o * width + b * d.ext..][..d.ext];
                for (dst, src) in dst.chunks_exact_mut(d.wp).zip(src.chunks_exact(g.out_w)) {
                    dst[..g.out_w].copy_from_slice(src);
                    dst[g.out_w..].fill(0.0);
                }
                if let Some(db) = db.as_mut() {
                    db[o] += reduce::sum(src);
                }
            }
        }
        // dW_g = gy_g @ cols_gᵀ, this chunk's share. Junk columns meet zero gradients, which
        // cancels them exactly unless they hold a non-finite input (then they are zeroed too).
        let dw = wanted.weight.then(|| -> Result<Vec<f32>> {
            let inputs = &x[first * per_sample..(first + samples) * per_sample];
            // A fold, not `all`: without the early exit the scan vectorises.
            let clean = !inputs.iter().fold(true, |finite, v| finite & v.is_finite());
            let mut dw = buffer_pool::zeroed("conv2d", a.out_channels * d.group_rows)?;
            // As dW_gᵀ = cols_g @ gy_gᵀ, transposed afterwards: gemm then packs the small
            // gradient rather than the columns (LeNet: 16 rows against 150).
            let mut dwt = vec![0.0; d.group_rows * d.group_outs];
            let gl = |gi: usize| Dims::matrix(gi * d.group_outs * width, width, true);
            // Finite inputs: one product per kernel row (c, ki), its kw tap rows read in place
            // from the kernel-row columns at a row stride of dw. Otherwise the full columns
            // with the junk zeroed, one product per group.
            let (cols, stride) = if clean {
                (unfold_chunk(x, &d, first, samples, true)?, 0)
            } else {
                unfold_kernel_rows(x, &d, first, samples)?
            };
            for gi in 0..a.groups {
                if clean {
                    let c = Dims::matrix(gi * d.group_rows * width, width, false);
                    gemm_into(&mut dwt, &cols, &c, &gy, &gl(gi), (d.group_rows, width, d.group_outs), d.gemm_threads)?;
                } else {
                    let (kh, kw) = (g.kernel_h, g.kernel_w);
                    let group_channels = g.channels / a.groups;
                    for r in 0..group_channels * kh {
                        let row = (gi * group_channels * kh + r) * stride;
                        let taps =
                            MatrixLayout { offset: row, batch_stride: 0, row_stride: g.dilation_w, col_stride: 1 };
                        let dst = &mut dwt[r * kw * d.group_outs..];
                        gemm_into(dst, &cols, &taps, &gy, &gl(gi), (kw, width, d.group_outs), d.gemm_threads)?;
                    }
                }
                let dst = &mut dw[gi * d.group_outs * d.group_rows..][..d.group_outs * d.group_rows];
                for (r, row) in dwt.chunks_exact(d.group_outs).enumerate() {
                    for (o, &v) in row.iter().enumerate() {
                        dst[o * d.group_rows + r] = v;
                    }
                }
            }
            buffer_pool::give_back(cols);
            Ok(dw)
        });
        let dw = dw.transpose()?;
        if let (Some(dx), Some(direct_dx)) = (dx.as_deref_mut(), &direct_dx) {
            direct_dx.run(grad, first, dx)?;
        }
        // dcols_g = W_gᵀ @ gy_g, each row added back into the padded plane at its tap's shift.
        if let Some(dx) = dx.filter(|_| direct_dx.is_none()) {
            let mut dcols = buffer_pool::take("conv2d", g.channels * d.taps * width)?;
            for gi in 0..a.groups {
                let w = Dims::matrix(gi * d.group_outs * d.group_rows, d.group_rows, true);
                let gl = Dims::matrix(gi * d.group_outs * width, width, false);
                let dst = &mut dcols[gi * d.group_rows * width..];
                gemm_into(dst, weight, &w, &gy, &gl, (d.group_rows, d.group_outs, width), d.gemm_threads)?;
            }
            let len = d.ext - d.tail;
            let mut padded = buffer_pool::zeroed("conv2d", d.padded_plane)?;
            for (b, dx_b) in dx.chunks_exact_mut(per_sample).enumerate() {
                for (c, dst) in dx_b.chunks_exact_mut(d.plane).enumerate() {
                    padded.fill(0.0);
                    for t in 0..d.taps {
                        let shift = d.shift(t);
                        let row = &dcols[(c * d.taps + t) * width + b * d.ext..][..len];
                        padded[shift..shift + len].iter_mut().zip(row).for_each(|(p, v)| *p += v);
                    }
                    for (i, dst_row) in dst.chunks_exact_mut(g.in_w).enumerate() {
                        dst_row.copy_from_slice(&padded[(i + g.pad_h) * d.wp + g.pad_w..][..g.in_w]);
                    }
                }
            }
            buffer_pool::give_back(dcols);
        }
        buffer_pool::give_back(gy);
        // This chunk's shares of the parameter gradients (its input gradient is written in place).
        Ok(Conv2dGrads { x: None, weight: dw, bias: db })
    };
    let chunks = n.div_ceil(d.chunk);
    let mut dx = wanted.x.then(|| buffer_pool::take("conv2d", n * per_sample)).transpose()?;
    let shares: Vec<Conv2dGrads<Vec<f32>>> = match dx.as_mut().filter(|dx| !dx.is_empty()) {
        Some(dx) => dx
            .par_chunks_mut(d.chunk * per_sample)
            .enumerate()
            .map(|(ci, dx)| backward_chunk(ci, Some(dx)))
            .collect::<Result<_>>(),
        None => (0..chunks).into_par_iter().map(|ci| backward_chunk(ci, None)).collect::<Result<_>>(),
    }?;
    // Chunk shares summed in chunk order: the same result on any number of threads.
    let sum = |len: usize, shares: &mut dyn Iterator<Item = &Vec<f32>>| {
        let mut total = buffer_pool::zeroed("conv2d", len)?;
        for share in shares {
            total.iter_mut().zip(share).for_each(|(t, s)| *t += s);
        }
        Ok::<_, crate::Error>(total)
    };
    let weight = wanted
        .weight
        .then(|| sum(a.out_channels * d.group_rows, &mut shares.iter().filter_map(|s| s.weight.as_ref())))
        .transpose()?;
    let bias =
        wanted.bias.then(|| sum(a.out_channels, &mut shares.iter().filter_map(|s| s.bias.as_ref()))).transpose()?;
    Ok(Conv2dGrads { x: dx, weight, bias })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::ConvGeom;
    use crate::testing::assert_close;

    /// Stride-1 geometry of `[n, c, h, w]` under `kernel`, `pad`, `dilation`.
    pub(crate) fn args(
        x: [usize; 4],
        out_channels: usize,
        groups: usize,
        kernel: (usize, usize),
        pad: (usize, usize),
        dil: (usize, usize),
    ) -> Conv2dArgs {
        let out_h = ConvGeom::out_extent(x[2], kernel.0, 1, pad.0, dil.0).unwrap();
        let out_w = ConvGeom::out_extent(x[3], kernel.1, 1, pad.1, dil.1).unwrap();
        let geom = ConvGeom {
            batch: x[0],
            channels: x[1],
            in_h: x[2],
            in_w: x[3],
            kernel_h: kernel.0,
            kernel_w: kernel.1,
            stride_h: 1,
            stride_w: 1,
            pad_h: pad.0,
            pad_w: pad.1,
            dilation_h: dil.0,
            dilation_w: dil.1,
            out_h,
            out_w,
        };
        Conv2dArgs { geom, out_channels, groups }
    }

    /// `len` values in [-1, 1], different for each `salt`.
    fn values(len: usize, salt: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| (crate::rng::pcg_hash(i ^ salt.wrapping_mul(0x9e37_79b9)) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// Calls `visit(y, x, w)` with the output, input and weight element indices of every
    /// multiply of the direct definition.
    fn for_each_tap(a: &Conv2dArgs, mut visit: impl FnMut(usize, usize, usize)) {
        let g = &a.geom;
        let (cg, og) = (g.channels / a.groups, a.out_channels / a.groups);
        for b in 0..g.batch {
            for o in 0..a.out_channels {
                for cl in 0..cg {
                    let c = o / og * cg + cl;
                    for ki in 0..g.kernel_h {
                        for kj in 0..g.kernel_w {
                            for i in 0..g.out_h {
                                for j in 0..g.out_w {
                                    let ii = (i + ki * g.dilation_h).checked_sub(g.pad_h).filter(|&v| v < g.in_h);
                                    let jj = (j + kj * g.dilation_w).checked_sub(g.pad_w).filter(|&v| v < g.in_w);
                                    let (Some(ii), Some(jj)) = (ii, jj) else { continue };
                                    let y = ((b * a.out_channels + o) * g.out_h + i) * g.out_w + j;
                                    let xi = ((b * g.channels + c) * g.in_h + ii) * g.in_w + jj;
                                    let wi = ((o * cg + cl) * g.kernel_h + ki) * g.kernel_w + kj;
                                    visit(y, xi, wi);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Inputs of a convolution drawn with `salt` (`x`, `w`, `gy`, `bias`) and the direct
    /// definition's results.
    pub(crate) struct Reference {
        pub x: Vec<f32>,
        pub w: Vec<f32>,
        pub gy: Vec<f32>,
        pub bias: Vec<f32>,
        pub y: Vec<f32>,
        pub y_bias: Vec<f32>,
        pub dx: Vec<f32>,
        pub dw: Vec<f32>,
        pub db: Vec<f32>,
    }

    pub(crate) fn reference(a: &Conv2dArgs, salt: u32) -> Reference {
        let g = &a.geom;
        let x = values(g.batch * g.channels * g.in_h * g.in_w, salt);
        let w = values(a.out_channels * g.channels / a.groups * g.kernel_h * g.kernel_w, salt + 1);
        let gy = values(g.batch * a.out_channels * g.out_h * g.out_w, salt + 2);
        let bias = values(a.out_channels, salt + 3);
        let (mut y, mut dx, mut dw) = (vec![0.0; gy.len()], vec![0.0; x.len()], vec![0.0; w.len()]);
        for_each_tap(a, |yi, xi, wi| {
            y[yi] += x[xi] * w[wi];
            dx[xi] += gy[yi] * w[wi];
            dw[wi] += gy[yi] * x[xi];
        });
        let out_plane = g.out_h * g.out_w;
        let y_bias = y.iter().enumerate().map(|(i, v)| v + bias[i / out_plane % a.out_channels]).collect();
        let mut db = vec![0.0; a.out_channels];
        gy.iter().enumerate().for_each(|(i, v)| db[i / out_plane % a.out_channels] += v);
        Reference { x, w, gy, bias, y, y_bias, dx, dw, db }
    }

    #[test]
    fn chunked_forward_and_backward_match_the_direct_definition() {
        let cases = [
            // LeNet's two layers (padded, unpadded), dilation, groups, a 1x1 kernel, a 1-wide input.
            args([5, 1, 12, 12], 3, 1, (5, 5), (2, 2), (1, 1)),
            args([5, 4, 7, 6], 6, 2, (3, 2), (0, 0), (1, 1)),
            args([3, 2, 7, 8], 2, 1, (2, 3), (1, 2), (2, 2)),
            args([4, 4, 5, 5], 4, 4, (3, 3), (1, 1), (1, 1)),
            args([3, 3, 4, 5], 2, 1, (1, 1), (0, 0), (1, 1)),
            args([2, 2, 6, 1], 3, 1, (3, 1), (1, 0), (1, 1)),
        ];
        for (k, a) in cases.iter().enumerate() {
            let g = &a.geom;
            let Reference { x, w, gy, bias, y, y_bias, dx, dw, db } = reference(a, 3 * k as u32);
            let per_sample = g.channels * g.kernel_h * g.kernel_w * g.out_h * (g.in_w + 2 * g.pad_w);
            // One sample per chunk, two per chunk (a short last chunk when the batch is odd), and
            // the whole batch in one chunk.
            for budget in [1, 2 * per_sample, usize::MAX / 2] {
                let what = format!("case {k} budget {budget}");
                assert_close(&format!("{what} y"), &forward(&x, &w, None, a, budget).unwrap(), &y, 1e-4);
                let with_bias = forward(&x, &w, Some(&bias), a, budget).unwrap();
                assert_close(&format!("{what} y + bias"), &with_bias, &y_bias, 1e-4);
                for ((wx, ww, wb), supports_direct) in
                    [(true, true, true), (false, true, false), (true, false, false), (false, false, true)]
                        .into_iter()
                        .flat_map(|wanted| [(wanted, false), (wanted, conv2d_direct::supports(a))])
                {
                    let wanted = Conv2dWanted { x: wx, weight: ww, bias: wb };
                    let direct = supports_direct && wanted.x;
                    let got = backward(&x, &w, &gy, a, wanted, budget, direct).unwrap();
                    let what = format!("{what} {wanted:?} direct input gradient {direct}");
                    assert_eq!((got.x.is_some(), got.weight.is_some(), got.bias.is_some()), (wx, ww, wb), "{what}");
                    got.x.inspect(|got| assert_close(&format!("{what} dx"), got, &dx, 1e-4));
                    got.weight.inspect(|got| assert_close(&format!("{what} dw"), got, &dw, 1e-4));
                    got.bias.inspect(|got| assert_close(&format!("{what} db"), got, &db, 1e-4));
                }
            }
        }
    }

    #[test]
    fn junk_columns_do_not_spread_non_finite_inputs() {
        // A 1x2 kernel without padding: column 0 of every input row is read by tap (0, 0) only,
        // but the shifted slice of tap (0, 1) also passes it, in a junk column.
        let a = args([1, 1, 3, 4], 1, 1, (1, 2), (0, 0), (1, 1));
        let mut x = values(12, 7);
        x[4] = f32::INFINITY;
        let gy = values(9, 8);
        let wanted = Conv2dWanted { x: false, weight: true, bias: false };
        let dw = backward(&x, &[0.5, 0.25], &gy, &a, wanted, CHUNK_COLUMN_ELEMS, true).unwrap().weight.unwrap();
        assert!(!dw[0].is_finite());
        let want: f32 =
            (0..3).flat_map(|i| (0..3).map(move |j| (i, j))).map(|(i, j)| gy[i * 3 + j] * x[i * 4 + j + 1]).sum();
        assert!((dw[1] - want).abs() < 1e-5, "got {}, want {want}", dw[1]);
    }
}
