//! Direct stride-1 convolution for few channels (LeNet's layers), without a column matrix.
//!
//! The output is computed on the same "shifted planes" as `conv2d.rs`: every output row at the
//! padded input's full width `wp`, so that kernel tap `t` reads the padded plane at one fixed
//! offset `shift(t)` from the output position. A strip of 16 consecutive output positions for a
//! block of up to 8 output channels is summed in registers over every input channel and tap:
//! one load of 16 inputs feeds 16·block multiply-adds, and nothing but the output is written.
//! With LeNet's 1 and 6 input channels the column matrix of the gemm path is 25 and 150 times
//! the input (written, then read by a gemm whose inner dimension is only 25 or 150); here it
//! never exists.
//!
//! The input gradient is the adjoint sum `Σ_o Σ_t W[o, c, t] · gy[o, q − shift(t)]` for the
//! padded plane's positions `q`, a strip of 16 for a block of input channels at a time, read from
//! an output gradient plane with zeros in front of it and in its junk columns; `conv2d.rs`'s
//! backward calls it for each of its chunks. The weight gradient stays a gemm over the column
//! matrix there: as a direct sum (a horizontal add per sample, channel, tap and output channel)
//! it took more time than the column matrix and gemm together (BENCHMARKS.md).
//!
//! The forward goes in chunks of samples fixed by the geometry; each output value is summed in
//! the same order whatever the chunk, so results are the same on any number of threads.

use rayon::prelude::*;

use super::buffer_pool;
use super::isa::{isa, Isa};
use crate::backend::Conv2dArgs;
use crate::Result;

/// Output positions per strip (one AVX-512 vector, two AVX2 ones).
const LANES: usize = 16;
/// Channels summed together in registers: the accumulators of one block (8 strips of 16).
const MAX_BLOCK: usize = 8;
/// Output channels the direct kernels take; more are the gemm path's (its products are then
/// large enough to run near peak).
const MAX_OUT_CHANNELS: usize = 32;
/// Input channels × taps the direct kernels take (LeNet's second layer has 150).
const MAX_ROWS: usize = 512;
/// Values (padded input planes and output planes) per chunk of samples: a chunk's working set
/// stays in L2, and LeNet at batch 64 still has several chunks per thread.
const CHUNK_VALUES: usize = 32 * 1024;

/// Whether the direct kernels handle this convolution: stride 1, one group, few channels.
pub fn supports(a: &Conv2dArgs) -> bool {
    let g = &a.geom;
    (g.stride_h, g.stride_w) == (1, 1)
        && a.groups == 1
        && a.out_channels <= MAX_OUT_CHANNELS
        && g.channels * g.kernel_h * g.kernel_w <= MAX_ROWS
}

/// Sizes derived from [`Conv2dArgs`].
struct Dims {
    a: Conv2dArgs,
    taps: usize,
    /// Tap offsets in the padded plane.
    shifts: Vec<usize>,
    /// Input plane `h·w`, output plane `oh·ow`.
    plane: usize,
    out_plane: usize,
    /// Padded plane width.
    wp: usize,
    /// Output positions per sample at full padded width (`oh·wp`) and their strips.
    ext: usize,
    ext_strips: usize,
    /// A padded input plane with room for the last strip's reads past its end (zeros).
    x_len: usize,
    /// Zeros in front of each output gradient plane (the largest shift), so that the input
    /// gradient's reads at `q − shift(t)` never go below the plane.
    front: usize,
    /// Strips of the padded plane's interior rows (`in_h·wp` positions from row `pad_h`).
    in_strips: usize,
    /// An output gradient plane: `front` zeros, the plane, zeros for the last strips' reads.
    g_len: usize,
    /// Samples per chunk.
    chunk: usize,
}

impl Dims {
    /// `chunk_values`: values per chunk (tests pass small ones to get many chunks).
    fn new(a: &Conv2dArgs, chunk_values: usize) -> Self {
        let g = &a.geom;
        let taps = g.kernel_h * g.kernel_w;
        let wp = g.in_w + 2 * g.pad_w;
        let padded_plane = (g.in_h + 2 * g.pad_h) * wp;
        let shifts: Vec<usize> =
            (0..taps).map(|t| (t / g.kernel_w) * g.dilation_h * wp + (t % g.kernel_w) * g.dilation_w).collect();
        let front = shifts.last().copied().unwrap_or(0);
        let ext = g.out_h * wp;
        let ext_strips = ext.div_ceil(LANES);
        let in_strips = (g.in_h * wp).div_ceil(LANES);
        // The forward and weight gradient read up to `ext_strips·16 − 1 + front`, which is below
        // `padded_plane + (kw − 1)·dw + 16`.
        let x_len = padded_plane + (g.kernel_w - 1) * g.dilation_w + LANES;
        // The input gradient reads up to `front + pad_h·wp + in_strips·16 − 1`.
        let g_len = front + (ext_strips * LANES).max(g.pad_h * wp + in_strips * LANES) + LANES;
        let per_sample = g.channels * x_len + a.out_channels * g_len;
        Dims {
            a: *a,
            taps,
            shifts,
            plane: g.in_h * g.in_w,
            out_plane: g.out_h * g.out_w,
            wp,
            ext,
            ext_strips,
            x_len,
            front,
            in_strips,
            g_len,
            chunk: (chunk_values / per_sample.max(1)).clamp(1, g.batch.max(1)),
        }
    }

    /// Copies sample `b`'s input planes into the interiors of `xp` (`channels` planes of
    /// `x_len`, zero outside the interiors).
    fn pad_into(&self, x: &[f32], b: usize, xp: &mut [f32]) {
        let g = &self.a.geom;
        for c in 0..g.channels {
            let src = &x[(b * g.channels + c) * self.plane..][..self.plane];
            let dst = &mut xp[c * self.x_len..][..self.x_len];
            for (i, row) in src.chunks_exact(g.in_w).enumerate() {
                dst[(i + g.pad_h) * self.wp + g.pad_w..][..g.in_w].copy_from_slice(row);
            }
        }
    }

    /// Copies sample `b`'s output gradient planes into `gp` (`out_channels` planes of `g_len`,
    /// each at `front`, its junk columns and the rest zero).
    fn grad_into(&self, grad: &[f32], b: usize, gp: &mut [f32]) {
        let g = &self.a.geom;
        for o in 0..self.a.out_channels {
            let src = &grad[(b * self.a.out_channels + o) * self.out_plane..][..self.out_plane];
            let dst = &mut gp[o * self.g_len + self.front..][..self.ext];
            for (dst, src) in dst.chunks_exact_mut(self.wp).zip(src.chunks_exact(g.out_w)) {
                dst[..g.out_w].copy_from_slice(src);
            }
        }
    }
}

/// Blocks of `count` channels: `(first, real, size)` with `size` one of the kernels' block sizes
/// (4, 6 or 8), at least `real`; the lanes past `real` get zero weights.
fn blocks(count: usize) -> Vec<(usize, usize, usize)> {
    (0..count)
        .step_by(MAX_BLOCK)
        .map(|first| {
            let real = (count - first).min(MAX_BLOCK);
            let size = match real {
                0..=4 => 4,
                5..=6 => 6,
                _ => 8,
            };
            (first, real, size)
        })
        .collect()
}

/// A block of channels in a packing of [`pack`].
#[derive(Clone, Copy, Debug)]
struct Block {
    /// The first channel, how many are real, and the kernel's block size (at least `real`).
    first: usize,
    real: usize,
    size: usize,
    /// Where the block's weights start in the packing.
    offset: usize,
}

/// Weights packed per block of `rows` channels: for each block, `[cols][taps][size]` with
/// `weight(row, col, tap)` (zero past the block's real rows). Returns the packing and each
/// block's offset into it.
fn pack(rows: usize, cols: usize, taps: usize, weight: impl Fn(usize, usize, usize) -> f32) -> (Vec<f32>, Vec<Block>) {
    let mut packed = Vec::new();
    let mut layout = Vec::new();
    for (first, real, size) in blocks(rows) {
        layout.push(Block { first, real, size, offset: packed.len() });
        for col in 0..cols {
            for t in 0..taps {
                packed.extend((0..size).map(|r| if r < real { weight(first + r, col, t) } else { 0.0 }));
            }
        }
    }
    (packed, layout)
}

/// A strip of 16 f32 lanes in registers. The methods are `unsafe`: an implementation may need
/// instructions the CPU must have (its module's `target_feature`).
trait Lanes: Copy {
    /// The 16 values of `s` from `at`.
    unsafe fn load(s: &[f32], at: usize) -> Self;
    unsafe fn splat(v: f32) -> Self;
    /// `acc + a·b` (fused where the instruction set has FMA).
    unsafe fn madd(a: Self, b: Self, acc: Self) -> Self;
    /// Writes the 16 lanes to `s` from `at`.
    unsafe fn store(self, s: &mut [f32], at: usize);
}

/// The portable strip: plain arrays, for CPUs without AVX2 and FMA.
#[derive(Clone, Copy)]
struct Scalar([f32; LANES]);

impl Lanes for Scalar {
    #[inline(always)]
    unsafe fn load(s: &[f32], at: usize) -> Self {
        Scalar(s[at..at + LANES].try_into().expect("a strip is 16 values"))
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Scalar([v; LANES])
    }
    #[inline(always)]
    unsafe fn madd(a: Self, b: Self, acc: Self) -> Self {
        Scalar(std::array::from_fn(|l| acc.0[l] + a.0[l] * b.0[l]))
    }
    #[inline(always)]
    unsafe fn store(self, s: &mut [f32], at: usize) {
        s[at..at + LANES].copy_from_slice(&self.0);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Lanes, LANES};

    /// One AVX-512 vector.
    #[derive(Clone, Copy)]
    pub(super) struct Avx512(__m512);

    impl Lanes for Avx512 {
        #[inline(always)]
        unsafe fn load(s: &[f32], at: usize) -> Self {
            let s = &s[at..at + LANES];
            // SAFETY: `s` holds 16 values; the caller has AVX-512F.
            Avx512(unsafe { _mm512_loadu_ps(s.as_ptr()) })
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            // SAFETY: the caller has AVX-512F.
            Avx512(unsafe { _mm512_set1_ps(v) })
        }
        #[inline(always)]
        unsafe fn madd(a: Self, b: Self, acc: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            Avx512(unsafe { _mm512_fmadd_ps(a.0, b.0, acc.0) })
        }
        #[inline(always)]
        unsafe fn store(self, s: &mut [f32], at: usize) {
            let s = &mut s[at..at + LANES];
            // SAFETY: `s` holds 16 values; the caller has AVX-512F.
            unsafe { _mm512_storeu_ps(s.as_mut_ptr(), self.0) }
        }
    }

    /// Two AVX2 vectors.
    #[derive(Clone, Copy)]
    pub(super) struct Avx2(__m256, __m256);

    impl Lanes for Avx2 {
        #[inline(always)]
        unsafe fn load(s: &[f32], at: usize) -> Self {
            let s = &s[at..at + LANES];
            // SAFETY: `s` holds 16 values; the caller has AVX.
            unsafe { Avx2(_mm256_loadu_ps(s.as_ptr()), _mm256_loadu_ps(s.as_ptr().add(8))) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { Avx2(_mm256_set1_ps(v), _mm256_set1_ps(v)) }
        }
        #[inline(always)]
        unsafe fn madd(a: Self, b: Self, acc: Self) -> Self {
            // SAFETY: the caller has FMA.
            unsafe { Avx2(_mm256_fmadd_ps(a.0, b.0, acc.0), _mm256_fmadd_ps(a.1, b.1, acc.1)) }
        }
        #[inline(always)]
        unsafe fn store(self, s: &mut [f32], at: usize) {
            let s = &mut s[at..at + LANES];
            // SAFETY: `s` holds 16 values; the caller has AVX.
            unsafe {
                _mm256_storeu_ps(s.as_mut_ptr(), self.0);
                _mm256_storeu_ps(s.as_mut_ptr().add(8), self.1);
            }
        }
    }
}

/// One strip of `B` output channels: `acc[r] += Σ_c Σ_t w[c][t][r] · xp[c][base + shift(t)..]`.
#[inline(always)]
unsafe fn forward_strip<V: Lanes, const B: usize>(d: &Dims, xp: &[f32], w: &[f32], base: usize, acc: &mut [V; B]) {
    for c in 0..d.a.geom.channels {
        let plane = &xp[c * d.x_len..][..d.x_len];
        let wc = &w[c * d.taps * B..][..d.taps * B];
        for (t, &shift) in d.shifts.iter().enumerate() {
            // SAFETY (every Lanes call here and below): the caller has V's instructions.
            let xv = unsafe { V::load(plane, base + shift) };
            let wt: &[f32; B] = wc[t * B..][..B].try_into().expect("B weights");
            for r in 0..B {
                acc[r] = unsafe { V::madd(V::splat(wt[r]), xv, acc[r]) };
            }
        }
    }
}

/// One sample's forward for the output channels of one block into `ext_out` (`B` planes of
/// `ext_strips·16`, at full padded width).
#[inline(always)]
unsafe fn forward_block<V: Lanes, const B: usize>(
    d: &Dims,
    xp: &[f32],
    w: &[f32],
    bias: &[f32; B],
    ext_out: &mut [f32],
) {
    let width = d.ext_strips * LANES;
    for s in 0..d.ext_strips {
        let mut acc: [V; B] = std::array::from_fn(|r| unsafe { V::splat(bias[r]) });
        unsafe { forward_strip::<V, B>(d, xp, w, s * LANES, &mut acc) };
        for (r, acc) in acc.into_iter().enumerate() {
            unsafe { acc.store(ext_out, r * width + s * LANES) };
        }
    }
}

/// One sample's input gradient for the input channels of one block into `in_out` (`B` planes
/// of `in_strips·16`: the padded plane's interior rows at full padded width):
/// `Σ_o Σ_t w[o][t][r] · gp[o][front + q − shift(t)]`.
#[inline(always)]
unsafe fn input_grad_block<V: Lanes, const B: usize>(d: &Dims, gp: &[f32], w: &[f32], in_out: &mut [f32]) {
    let g = &d.a.geom;
    let width = d.in_strips * LANES;
    let start = d.front + g.pad_h * d.wp;
    for s in 0..d.in_strips {
        let mut acc: [V; B] = std::array::from_fn(|_| unsafe { V::splat(0.0) });
        for o in 0..d.a.out_channels {
            let plane = &gp[o * d.g_len..][..d.g_len];
            let wo = &w[o * d.taps * B..][..d.taps * B];
            for (t, &shift) in d.shifts.iter().enumerate() {
                let gv = unsafe { V::load(plane, start + s * LANES - shift) };
                let wt: &[f32; B] = wo[t * B..][..B].try_into().expect("B weights");
                for r in 0..B {
                    acc[r] = unsafe { V::madd(V::splat(wt[r]), gv, acc[r]) };
                }
            }
        }
        for (r, acc) in acc.into_iter().enumerate() {
            unsafe { acc.store(in_out, r * width + s * LANES) };
        }
    }
}

/// The kernels above for each block size, with the strips of `V`.
#[inline(always)]
unsafe fn forward_any<V: Lanes>(d: &Dims, xp: &[f32], w: &[f32], bias: &[f32], size: usize, ext_out: &mut [f32]) {
    // SAFETY (all three): the caller has V's instructions.
    match size {
        4 => unsafe { forward_block::<V, 4>(d, xp, w, bias.try_into().expect("4 biases"), ext_out) },
        6 => unsafe { forward_block::<V, 6>(d, xp, w, bias.try_into().expect("6 biases"), ext_out) },
        _ => unsafe { forward_block::<V, 8>(d, xp, w, bias.try_into().expect("8 biases"), ext_out) },
    }
}

#[inline(always)]
unsafe fn input_grad_any<V: Lanes>(d: &Dims, gp: &[f32], w: &[f32], size: usize, in_out: &mut [f32]) {
    // SAFETY (all three): the caller has V's instructions.
    match size {
        4 => unsafe { input_grad_block::<V, 4>(d, gp, w, in_out) },
        6 => unsafe { input_grad_block::<V, 6>(d, gp, w, in_out) },
        _ => unsafe { input_grad_block::<V, 8>(d, gp, w, in_out) },
    }
}

/// The dispatching kernels compiled for one instruction set and its strip type.
#[cfg(target_arch = "x86_64")]
macro_rules! wide_kernels {
    ($module:ident, $feature:literal, $lanes:ty) => {
        mod $module {
            use super::Dims;

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn forward(
                d: &Dims,
                xp: &[f32],
                w: &[f32],
                bias: &[f32],
                size: usize,
                ext_out: &mut [f32],
            ) {
                // SAFETY: this function's features are the strip type's.
                unsafe { super::forward_any::<$lanes>(d, xp, w, bias, size, ext_out) }
            }

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn input_grad(d: &Dims, gp: &[f32], w: &[f32], size: usize, in_out: &mut [f32]) {
                // SAFETY: as above.
                unsafe { super::input_grad_any::<$lanes>(d, gp, w, size, in_out) }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
wide_kernels!(avx512, "avx512f", super::x86::Avx512);
#[cfg(target_arch = "x86_64")]
wide_kernels!(avx2, "avx2,fma", super::x86::Avx2);

fn forward_dispatch(isa: Isa, d: &Dims, xp: &[f32], w: &[f32], bias: &[f32], size: usize, ext_out: &mut [f32]) {
    match isa {
        // SAFETY: `isa()` found the CPU to support the module's instructions.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::forward(d, xp, w, bias, size, ext_out) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::forward(d, xp, w, bias, size, ext_out) },
        // SAFETY: the portable strip needs no particular instructions.
        _ => unsafe { forward_any::<Scalar>(d, xp, w, bias, size, ext_out) },
    }
}

fn input_grad_dispatch(isa: Isa, d: &Dims, gp: &[f32], w: &[f32], size: usize, in_out: &mut [f32]) {
    match isa {
        // SAFETY: `isa()` found the CPU to support the module's instructions.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::input_grad(d, gp, w, size, in_out) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::input_grad(d, gp, w, size, in_out) },
        // SAFETY: the portable strip needs no particular instructions.
        _ => unsafe { input_grad_any::<Scalar>(d, gp, w, size, in_out) },
    }
}

/// Forward: `[n, c, h, w]` with weight `[o, c, kh, kw]` and an optional bias `[o]` →
/// `[n, o, oh, ow]`.
pub fn conv2d(x: &[f32], weight: &[f32], bias: Option<&[f32]>, a: &Conv2dArgs) -> Result<Vec<f32>> {
    forward(x, weight, bias, a, CHUNK_VALUES, isa())
}

fn forward(
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    a: &Conv2dArgs,
    chunk_values: usize,
    isa: Isa,
) -> Result<Vec<f32>> {
    let d = Dims::new(a, chunk_values);
    let g = &a.geom;
    let per_sample = a.out_channels * d.out_plane;
    let mut out = buffer_pool::take("conv2d", g.batch * per_sample)?;
    if out.is_empty() {
        return Ok(out);
    }
    let (cols, taps) = (g.channels, d.taps);
    let (packed, layout) = pack(a.out_channels, cols, taps, |o, c, t| weight[(o * cols + c) * taps + t]);
    let width = d.ext_strips * LANES;
    out.par_chunks_mut(d.chunk * per_sample).enumerate().try_for_each(|(ci, out_chunk)| {
        let mut xp = buffer_pool::filled("conv2d", g.channels * d.x_len, 0.0)?;
        let mut ext_out = buffer_pool::take("conv2d", MAX_BLOCK * width)?;
        for (b, out_b) in out_chunk.chunks_exact_mut(per_sample).enumerate() {
            d.pad_into(x, ci * d.chunk + b, &mut xp);
            for &Block { first, real, size, offset } in &layout {
                let mut block_bias = [0.0; MAX_BLOCK];
                if let Some(bias) = bias {
                    block_bias[..real].copy_from_slice(&bias[first..first + real]);
                }
                let w = &packed[offset..][..cols * taps * size];
                forward_dispatch(isa, &d, &xp, w, &block_bias[..size], size, &mut ext_out);
                // Drop the junk columns: [size, oh, wp] → [real, oh, ow].
                for r in 0..real {
                    let dst = &mut out_b[(first + r) * d.out_plane..][..d.out_plane];
                    let src = &ext_out[r * width..][..d.ext];
                    for (dst, src) in dst.chunks_exact_mut(g.out_w).zip(src.chunks_exact(d.wp)) {
                        dst.copy_from_slice(&src[..g.out_w]);
                    }
                }
            }
        }
        buffer_pool::give_back(xp);
        buffer_pool::give_back(ext_out);
        Ok(())
    })?;
    Ok(out)
}

/// The input gradient of the direct kernels, prepared for one weight: `conv2d.rs`'s backward
/// calls [`InputGrad::run`] on each of its chunks of samples.
pub struct InputGrad {
    d: Dims,
    /// The weights per block of input channels, `[outs][taps][size]` each, and the blocks.
    packed: Vec<f32>,
    layout: Vec<Block>,
    isa: Isa,
}

impl InputGrad {
    /// For `weight` `[o, c, kh, kw]` of a convolution [`supports`] takes.
    pub fn new(weight: &[f32], a: &Conv2dArgs) -> Self {
        Self::with_isa(weight, a, isa())
    }

    fn with_isa(weight: &[f32], a: &Conv2dArgs, isa: Isa) -> Self {
        let d = Dims::new(a, CHUNK_VALUES);
        let (cols, taps) = (a.geom.channels, d.taps);
        let (packed, layout) = pack(cols, a.out_channels, taps, |c, o, t| weight[(o * cols + c) * taps + t]);
        InputGrad { d, packed, layout, isa }
    }

    /// The input gradient `dx` (`[samples, c, h, w]`) of samples `first..` from the output
    /// gradient `grad` (`[n, o, oh, ow]`, the whole batch's).
    pub fn run(&self, grad: &[f32], first: usize, dx: &mut [f32]) -> Result<()> {
        let d = &self.d;
        let g = &d.a.geom;
        let (outs, taps) = (d.a.out_channels, d.taps);
        let width = d.in_strips * LANES;
        // Zeros around the plane and in its junk columns stay: every sample writes the same cells.
        let mut gp = buffer_pool::filled("conv2d", outs * d.g_len, 0.0)?;
        let mut in_out = buffer_pool::take("conv2d", MAX_BLOCK * width)?;
        for (b, dx_b) in dx.chunks_exact_mut(g.channels * d.plane).enumerate() {
            d.grad_into(grad, first + b, &mut gp);
            for &Block { first: c0, real, size, offset } in &self.layout {
                let w = &self.packed[offset..][..outs * taps * size];
                input_grad_dispatch(self.isa, d, &gp, w, size, &mut in_out);
                // The interior rows at full padded width → [real, h, w].
                for r in 0..real {
                    let dst = &mut dx_b[(c0 + r) * d.plane..][..d.plane];
                    let src = &in_out[r * width..];
                    for (i, dst) in dst.chunks_exact_mut(g.in_w).enumerate() {
                        dst.copy_from_slice(&src[i * d.wp + g.pad_w..][..g.in_w]);
                    }
                }
            }
        }
        buffer_pool::give_back(gp);
        buffer_pool::give_back(in_out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::conv2d::tests::{args, reference, Reference};
    use crate::backend::cpu::isa::isas;
    use crate::testing::assert_close;

    #[test]
    fn direct_forward_and_input_gradient_match_the_direct_definition() {
        let cases = [
            // LeNet's two layers (padded, unpadded) at a small batch.
            args([3, 1, 28, 28], 6, 1, (5, 5), (2, 2), (1, 1)),
            args([3, 6, 14, 14], 16, 1, (5, 5), (0, 0), (1, 1)),
            // Blocks of 8 + 3 (a 4-block) output channels and 8 + 5 (a 6-block) input channels,
            // planes whose strips end mid-row, dilation, a 1x1 kernel, a 1-wide input.
            args([3, 13, 7, 6], 11, 1, (3, 2), (1, 0), (1, 1)),
            args([2, 2, 9, 8], 5, 1, (2, 3), (1, 2), (2, 2)),
            args([3, 3, 4, 5], 2, 1, (1, 1), (0, 0), (1, 1)),
            args([2, 2, 6, 1], 7, 1, (3, 1), (1, 0), (1, 1)),
        ];
        for (k, a) in cases.iter().enumerate() {
            assert!(supports(a), "case {k}");
            let g = &a.geom;
            let Reference { x, w, gy, bias, y, y_bias, dx, .. } = reference(a, 5 * k as u32);
            // One sample per chunk, two per chunk (a short last chunk when the batch is odd),
            // and the whole batch in one chunk.
            let per_sample = {
                let d = Dims::new(a, usize::MAX);
                g.channels * d.x_len + a.out_channels * d.g_len
            };
            for isa in isas() {
                for chunk_values in [1, 2 * per_sample, usize::MAX / 2] {
                    let what = format!("case {k} {isa:?} chunk values {chunk_values}");
                    let got = forward(&x, &w, None, a, chunk_values, isa).unwrap();
                    assert_close(&format!("{what} y"), &got, &y, 1e-4);
                    let got = forward(&x, &w, Some(&bias), a, chunk_values, isa).unwrap();
                    assert_close(&format!("{what} y + bias"), &got, &y_bias, 1e-4);
                    let mut got = vec![f32::NAN; x.len()];
                    let per_sample = g.channels * g.in_h * g.in_w;
                    let input_grad = InputGrad::with_isa(&w, a, isa);
                    // In chunks of two samples (the last one short when the batch is odd).
                    for (ci, dx) in got.chunks_mut(2 * per_sample).enumerate() {
                        input_grad.run(&gy, 2 * ci, dx).unwrap();
                    }
                    assert_close(&format!("{what} dx"), &got, &dx, 1e-4);
                }
            }
        }
    }

    #[test]
    fn wide_channel_counts_and_strides_go_to_the_gemm_path() {
        let lenet = args([1, 6, 14, 14], 16, 1, (5, 5), (0, 0), (1, 1));
        assert!(supports(&lenet));
        assert!(!supports(&args([1, 64, 8, 8], 64, 1, (3, 3), (1, 1), (1, 1))));
        assert!(!supports(&args([1, 4, 8, 8], 4, 2, (3, 3), (1, 1), (1, 1))));
        let mut strided = lenet;
        strided.geom.stride_h = 2;
        assert!(!supports(&strided));
    }
}
