//! Max pooling with the 2×2, stride-2 window of most CNNs (both of LeNet's pools), one
//! `[h, w]` plane at a time, forward and backward, with AVX-512, AVX2 and portable paths chosen
//! at run time. Other windows take the general scans of `conv.rs`, whose rules these follow.
//!
//! Forward: an output row reads two input rows; splitting each into its even and odd columns
//! (one shuffle per vector) puts the four taps of 16 (AVX-512) or 8 (AVX2) windows side by side
//! in four vectors. The taps are compared in row-major window order with the general scan's rule:
//! a tap replaces the best so far when it is greater, or when it is NaN and the best is not. So
//! the first maximum wins a tie (`-0` and `+0` tie) and the first NaN stays. The argmax is the
//! tap's flat index in the plane, as everywhere. Row ends are masked loads and stores.
//!
//! Backward (AVX-512 and AVX2, rows of at least [`MIN_BACKWARD_WIDTH`] windows): the windows do
//! not overlap, so every input cell gets at most one gradient and the plane is written whole,
//! without the zero fill and scatter of the general path: each window's four cells get `0 + g`
//! where its argmax points and `0` at the other three (`0 + g` is the scatter's sum onto zeros:
//! a `-0` gradient lands as `+0`), and cells in no window (the last row or column of an odd size)
//! get 0. An argmax outside its own window, which the forward never records, makes
//! [`backward_plane`] report it, and the caller scatters that plane instead, so every argmax
//! means what it means to the general path.

use super::isa::Isa;
use crate::backend::ConvGeom;

/// Output rows shorter than this many windows take the zero fill and scatter in the backward:
/// with a run per row, the fixed cost of a run outweighs the clearing pass it saves (LeNet's
/// second pool, 5 windows a row: 43 µs instead of 25 for [64, 16, 10, 10]; its first, 14 a row:
/// 58 µs instead of 75 for [64, 6, 28, 28]; AVX-512, one thread).
pub const MIN_BACKWARD_WIDTH: usize = 8;

/// Whether `g` is the 2×2, stride-2, unpadded, undilated window these kernels take.
pub fn applies(g: &ConvGeom) -> bool {
    (g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.pad_h, g.pad_w)
        == (2, 2, 2, 2, 1, 1, 0, 0)
}

/// A run of up to `LANES` neighbouring windows of one output row. The methods are `unsafe`: an
/// implementation may need instructions the CPU must have (its module's `target_feature`).
trait Windows {
    /// Windows per run.
    const LANES: usize;
    /// The maxima `o` and their argmaxes `a` of `o.len()` windows over the rows `r0` (top) and
    /// `r1` (bottom), `2·o.len()` values each; the first window's top-left cell is `base` in a
    /// plane of width `w`.
    unsafe fn forward(r0: &[f32], r1: &[f32], base: u32, w: u32, o: &mut [f32], a: &mut [u32]);
}

/// The backward of a run, for the vector paths only (one window at a time it is slower than the
/// zero fill and scatter).
#[cfg(target_arch = "x86_64")]
trait WindowsBackward: Windows {
    /// The input gradient rows `d0`, `d1` (`2·g.len()` cells each) of `g.len()` windows from their
    /// gradients `g` and argmaxes `a`, or `false` (cells unspecified) when an argmax lies outside
    /// its window.
    unsafe fn backward(g: &[f32], a: &[u32], base: u32, w: u32, d0: &mut [f32], d1: &mut [f32]) -> bool;
}

/// The portable run: one window at a time.
struct Portable;

impl Windows for Portable {
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn forward(r0: &[f32], r1: &[f32], base: u32, w: u32, o: &mut [f32], a: &mut [u32]) {
        let windows = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        for (j, ((o, a), (p0, p1))) in o.iter_mut().zip(a.iter_mut()).zip(windows).enumerate() {
            let at = base + 2 * j as u32;
            let (mut best, mut best_at) = (p0[0], at);
            for (v, v_at) in [(p0[1], at + 1), (p1[0], at + w), (p1[1], at + w + 1)] {
                let take = (v > best) | (v.is_nan() & !best.is_nan());
                best = if take { v } else { best };
                best_at = if take { v_at } else { best_at };
            }
            (*o, *a) = (best, best_at);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Windows, WindowsBackward};

    /// `0, 2, 4, …`: the even lanes of two vectors for `permutex2var`, and each window's
    /// top-left column (twice its lane).
    const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
    const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
    /// Lanes `0..8` and `8..16` of two vectors interleaved (`a0 b0 a1 b1 …`).
    const ZIP_LO: [i32; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
    const ZIP_HI: [i32; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];

    /// 16 windows in AVX-512 vectors.
    pub(super) struct Avx512;

    /// The first `n` (at most 16) lanes.
    #[inline(always)]
    fn mask16(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// The even and odd columns of the `2n` values of `row` (n ≤ 16); lanes past `n` are 0.
    #[inline(always)]
    unsafe fn split16(row: &[f32]) -> (__m512, __m512) {
        let len = row.len();
        // SAFETY (this block): masked loads touch only the lanes of `row`; the caller has
        // AVX-512F.
        unsafe {
            let lo = _mm512_maskz_loadu_ps(mask16(len.min(16)), row.as_ptr());
            let hi = if len > 16 {
                _mm512_maskz_loadu_ps(mask16(len - 16), row.as_ptr().add(16))
            } else {
                _mm512_setzero_ps()
            };
            let (even, odd) = (_mm512_loadu_epi32(EVEN.as_ptr()), _mm512_loadu_epi32(ODD.as_ptr()));
            (_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi))
        }
    }

    /// Writes the first `row.len() / 2` lanes of `even` and `odd` interleaved to `row`.
    #[inline(always)]
    unsafe fn merge16(row: &mut [f32], even: __m512, odd: __m512) {
        let len = row.len();
        // SAFETY (this block): masked stores touch only the lanes of `row`; the caller has
        // AVX-512F.
        unsafe {
            let (zl, zh) = (_mm512_loadu_epi32(ZIP_LO.as_ptr()), _mm512_loadu_epi32(ZIP_HI.as_ptr()));
            _mm512_mask_storeu_ps(row.as_mut_ptr(), mask16(len.min(16)), _mm512_permutex2var_ps(even, zl, odd));
            if len > 16 {
                let hi = _mm512_permutex2var_ps(even, zh, odd);
                _mm512_mask_storeu_ps(row.as_mut_ptr().add(16), mask16(len - 16), hi);
            }
        }
    }

    impl Windows for Avx512 {
        const LANES: usize = 16;

        #[inline(always)]
        unsafe fn forward(r0: &[f32], r1: &[f32], base: u32, w: u32, o: &mut [f32], a: &mut [u32]) {
            let n = o.len().min(a.len());
            assert!(n <= 16 && r0.len() == 2 * n && r1.len() == 2 * n);
            // SAFETY (this block): the caller has AVX-512F; stores are masked to `n` lanes.
            unsafe {
                let ((p00, p01), (p10, p11)) = (split16(r0), split16(r1));
                let (mut best, mut off) = (p00, _mm512_setzero_si512());
                for (v, v_off) in [(p01, 1), (p10, w), (p11, w + 1)] {
                    let greater = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, best);
                    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v) & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
                    let take = greater | nan;
                    best = _mm512_mask_blend_ps(take, best, v);
                    off = _mm512_mask_blend_epi32(take, off, _mm512_set1_epi32(v_off as i32));
                }
                let first = _mm512_add_epi32(_mm512_set1_epi32(base as i32), _mm512_loadu_epi32(EVEN.as_ptr()));
                _mm512_mask_storeu_ps(o.as_mut_ptr(), mask16(n), best);
                _mm512_mask_storeu_epi32(a.as_mut_ptr().cast(), mask16(n), _mm512_add_epi32(first, off));
            }
        }
    }

    impl WindowsBackward for Avx512 {
        #[inline(always)]
        unsafe fn backward(g: &[f32], a: &[u32], base: u32, w: u32, d0: &mut [f32], d1: &mut [f32]) -> bool {
            let n = g.len();
            assert!(n <= 16 && a.len() == n && d0.len() == 2 * n && d1.len() == 2 * n);
            // SAFETY (this block): the caller has AVX-512F; loads and stores are masked to the
            // slices' lanes.
            unsafe {
                let m = mask16(n);
                let gv = _mm512_maskz_loadu_ps(m, g.as_ptr());
                let first = _mm512_add_epi32(_mm512_set1_epi32(base as i32), _mm512_loadu_epi32(EVEN.as_ptr()));
                let off = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, a.as_ptr().cast()), first);
                let hit0 = _mm512_cmpeq_epi32_mask(off, _mm512_setzero_si512());
                let hit1 = _mm512_cmpeq_epi32_mask(off, _mm512_set1_epi32(1));
                let hit2 = _mm512_cmpeq_epi32_mask(off, _mm512_set1_epi32(w as i32));
                let hit3 = _mm512_cmpeq_epi32_mask(off, _mm512_set1_epi32(w as i32 + 1));
                if (hit0 | hit1 | hit2 | hit3) & m != m {
                    return false;
                }
                // `0 + g` where the argmax points, 0 elsewhere.
                let zero = _mm512_setzero_ps();
                let (c0, c1) = (_mm512_maskz_add_ps(hit0, zero, gv), _mm512_maskz_add_ps(hit1, zero, gv));
                let (c2, c3) = (_mm512_maskz_add_ps(hit2, zero, gv), _mm512_maskz_add_ps(hit3, zero, gv));
                merge16(d0, c0, c1);
                merge16(d1, c2, c3);
            }
            true
        }
    }

    /// 8 windows in AVX2 vectors.
    pub(super) struct Avx2;

    /// All bits set in the first `n` (at most 8) 32-bit lanes.
    #[inline(always)]
    unsafe fn mask8(n: usize) -> __m256i {
        // SAFETY: the caller has AVX2.
        unsafe { _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)) }
    }

    /// The even and odd columns of the `2n` values of `row` (n ≤ 8); lanes past `n` are 0.
    #[inline(always)]
    unsafe fn split8(row: &[f32]) -> (__m256, __m256) {
        let len = row.len();
        // SAFETY (this block): masked loads touch only the lanes of `row`; the caller has AVX2.
        unsafe {
            let lo = _mm256_maskload_ps(row.as_ptr(), mask8(len.min(8)));
            let hi =
                if len > 8 { _mm256_maskload_ps(row.as_ptr().add(8), mask8(len - 8)) } else { _mm256_setzero_ps() };
            // Per 128-bit half: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6; then the 64-bit pairs in order.
            let even = _mm256_castps_pd(_mm256_shuffle_ps::<0b10_00_10_00>(lo, hi));
            let odd = _mm256_castps_pd(_mm256_shuffle_ps::<0b11_01_11_01>(lo, hi));
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(even)),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(odd)),
            )
        }
    }

    /// Writes the first `row.len() / 2` lanes of `even` and `odd` interleaved to `row`.
    #[inline(always)]
    unsafe fn merge8(row: &mut [f32], even: __m256, odd: __m256) {
        let len = row.len();
        // SAFETY (this block): masked stores touch only the lanes of `row`; the caller has AVX2.
        unsafe {
            // e0 o0 e1 o1 | e4 o4 e5 o5 and e2 o2 e3 o3 | e6 o6 e7 o7.
            let (lo, hi) = (_mm256_unpacklo_ps(even, odd), _mm256_unpackhi_ps(even, odd));
            _mm256_maskstore_ps(row.as_mut_ptr(), mask8(len.min(8)), _mm256_permute2f128_ps::<0x20>(lo, hi));
            if len > 8 {
                _mm256_maskstore_ps(row.as_mut_ptr().add(8), mask8(len - 8), _mm256_permute2f128_ps::<0x31>(lo, hi));
            }
        }
    }

    impl Windows for Avx2 {
        const LANES: usize = 8;

        #[inline(always)]
        unsafe fn forward(r0: &[f32], r1: &[f32], base: u32, w: u32, o: &mut [f32], a: &mut [u32]) {
            let n = o.len().min(a.len());
            assert!(n <= 8 && r0.len() == 2 * n && r1.len() == 2 * n);
            // SAFETY (this block): the caller has AVX2; stores are masked to `n` lanes.
            unsafe {
                let ((p00, p01), (p10, p11)) = (split8(r0), split8(r1));
                let (mut best, mut off) = (p00, _mm256_setzero_ps());
                for (v, v_off) in [(p01, 1), (p10, w), (p11, w + 1)] {
                    let greater = _mm256_cmp_ps::<_CMP_GT_OQ>(v, best);
                    let nan =
                        _mm256_and_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v), _mm256_cmp_ps::<_CMP_ORD_Q>(best, best));
                    let take = _mm256_or_ps(greater, nan);
                    best = _mm256_blendv_ps(best, v, take);
                    off = _mm256_blendv_ps(off, _mm256_castsi256_ps(_mm256_set1_epi32(v_off as i32)), take);
                }
                let first = _mm256_add_epi32(_mm256_set1_epi32(base as i32), _mm256_loadu_si256(EVEN.as_ptr().cast()));
                let m = mask8(n);
                _mm256_maskstore_ps(o.as_mut_ptr(), m, best);
                _mm256_maskstore_epi32(a.as_mut_ptr().cast(), m, _mm256_add_epi32(first, _mm256_castps_si256(off)));
            }
        }
    }

    impl WindowsBackward for Avx2 {
        #[inline(always)]
        unsafe fn backward(g: &[f32], a: &[u32], base: u32, w: u32, d0: &mut [f32], d1: &mut [f32]) -> bool {
            let n = g.len();
            assert!(n <= 8 && a.len() == n && d0.len() == 2 * n && d1.len() == 2 * n);
            // SAFETY (this block): the caller has AVX2; loads and stores are masked to the
            // slices' lanes.
            unsafe {
                let m = mask8(n);
                let gv = _mm256_maskload_ps(g.as_ptr(), m);
                let first = _mm256_add_epi32(_mm256_set1_epi32(base as i32), _mm256_loadu_si256(EVEN.as_ptr().cast()));
                let off = _mm256_sub_epi32(_mm256_maskload_epi32(a.as_ptr().cast(), m), first);
                let hit0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(off, _mm256_setzero_si256()));
                let hit1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(off, _mm256_set1_epi32(1)));
                let hit2 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(off, _mm256_set1_epi32(w as i32)));
                let hit3 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(off, _mm256_set1_epi32(w as i32 + 1)));
                let hit = _mm256_or_ps(_mm256_or_ps(hit0, hit1), _mm256_or_ps(hit2, hit3));
                if _mm256_movemask_ps(_mm256_andnot_ps(hit, _mm256_castsi256_ps(m))) != 0 {
                    return false;
                }
                // `0 + g` where the argmax points, 0 elsewhere.
                let zero = _mm256_setzero_ps();
                let (c0, c1) =
                    (_mm256_add_ps(zero, _mm256_and_ps(hit0, gv)), _mm256_add_ps(zero, _mm256_and_ps(hit1, gv)));
                let (c2, c3) =
                    (_mm256_add_ps(zero, _mm256_and_ps(hit2, gv)), _mm256_add_ps(zero, _mm256_and_ps(hit3, gv)));
                merge8(d0, c0, c1);
                merge8(d1, c2, c3);
            }
            true
        }
    }
}

/// One plane's forward with the runs of `V`: `o` and `a` are `[out_h, out_w]`.
#[inline(always)]
unsafe fn forward_with<V: Windows>(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    let (w, ow) = (g.in_w, g.out_w);
    for oi in 0..g.out_h {
        let top = 2 * oi * w;
        let (r0, r1) = (&src[top..][..2 * ow], &src[top + w..][..2 * ow]);
        let (orow, arow) = (&mut o[oi * ow..][..ow], &mut a[oi * ow..][..ow]);
        for oj in (0..ow).step_by(V::LANES) {
            let n = (ow - oj).min(V::LANES);
            let (r0, r1) = (&r0[2 * oj..][..2 * n], &r1[2 * oj..][..2 * n]);
            // SAFETY: the caller has V's instructions.
            unsafe { V::forward(r0, r1, (top + 2 * oj) as u32, w as u32, &mut orow[oj..][..n], &mut arow[oj..][..n]) };
        }
    }
}

/// One plane's backward with the runs of `V`: `d` is `[in_h, in_w]`; `false` as
/// [`backward_plane`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn backward_with<V: WindowsBackward>(grad: &[f32], arg: &[u32], g: &ConvGeom, d: &mut [f32]) -> bool {
    let (w, ow) = (g.in_w, g.out_w);
    for oi in 0..g.out_h {
        let top = 2 * oi * w;
        let (d0, d1) = d[top..top + 2 * w].split_at_mut(w);
        let (grow, arow) = (&grad[oi * ow..][..ow], &arg[oi * ow..][..ow]);
        for oj in (0..ow).step_by(V::LANES) {
            let n = (ow - oj).min(V::LANES);
            let (c0, c1) = (&mut d0[2 * oj..][..2 * n], &mut d1[2 * oj..][..2 * n]);
            // SAFETY: the caller has V's instructions.
            if !unsafe { V::backward(&grow[oj..][..n], &arow[oj..][..n], (top + 2 * oj) as u32, w as u32, c0, c1) } {
                return false;
            }
        }
        d0[2 * ow..].fill(0.0);
        d1[2 * ow..].fill(0.0);
    }
    d[2 * g.out_h * w..].fill(0.0);
    true
}

/// The plane kernels compiled for one instruction set and its runs.
#[cfg(target_arch = "x86_64")]
macro_rules! wide_kernels {
    ($module:ident, $feature:literal, $windows:ty) => {
        mod $module {
            use crate::backend::ConvGeom;

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn forward(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
                // SAFETY: this function's features are the runs'.
                unsafe { super::forward_with::<$windows>(src, g, o, a) }
            }

            #[target_feature(enable = $feature)]
            pub(super) unsafe fn backward(grad: &[f32], arg: &[u32], g: &ConvGeom, d: &mut [f32]) -> bool {
                // SAFETY: as above.
                unsafe { super::backward_with::<$windows>(grad, arg, g, d) }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
wide_kernels!(avx512, "avx512f", super::x86::Avx512);
#[cfg(target_arch = "x86_64")]
wide_kernels!(avx2, "avx2,fma", super::x86::Avx2);

/// The portable forward, kept out of line: inlined into the per-plane rayon closure, the
/// selects of a scalar 2×2 loop were compiled to data-dependent branches, mispredicted on real
/// activations (BENCHMARKS.md).
#[inline(never)]
fn forward_portable(src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    // SAFETY: the portable runs need no particular instructions.
    unsafe { forward_with::<Portable>(src, g, o, a) }
}

/// The maxima `o` and argmaxes `a` (`[out_h, out_w]`) of one input plane `src` (`[in_h, in_w]`)
/// for a window that [`applies`].
pub fn forward_plane(isa: Isa, src: &[f32], g: &ConvGeom, o: &mut [f32], a: &mut [u32]) {
    debug_assert!(applies(g));
    match isa {
        // SAFETY: `isa()` found the CPU to support the module's instructions.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::forward(src, g, o, a) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::forward(src, g, o, a) },
        _ => forward_portable(src, g, o, a),
    }
}

/// One input plane's gradient `d` (`[in_h, in_w]`, every cell written) from the output
/// gradient `grad` and the argmaxes `arg` of the forward (`[out_h, out_w]`), for a window that
/// [`applies`]. `false` when it does not take the plane: without AVX2, for rows shorter than
/// [`MIN_BACKWARD_WIDTH`] windows, or when an argmax lies outside its window; `d` is then
/// unspecified, and the caller zero-fills and scatters.
pub fn backward_plane(isa: Isa, grad: &[f32], arg: &[u32], g: &ConvGeom, d: &mut [f32]) -> bool {
    debug_assert!(applies(g));
    if g.out_w < MIN_BACKWARD_WIDTH {
        return false;
    }
    match isa {
        // SAFETY: `isa()` found the CPU to support the module's instructions.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::backward(grad, arg, g, d) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::backward(grad, arg, g, d) },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::buffer_pool;
    use crate::backend::cpu::conv::{max_pool2d, max_pool2d_backward};
    use crate::backend::cpu::isa::isas;

    fn geom(batch: usize, channels: usize, h: usize, w: usize) -> ConvGeom {
        let g = ConvGeom::square(batch, channels, (h, w), 2, 2, 0, 1).unwrap();
        assert!(applies(&g));
        g
    }

    /// The definition of the forward: each window's taps in row-major order; a tap replaces the
    /// best so far when it is greater, or when it is NaN and the best is not.
    fn forward_definition(src: &[f32], g: &ConvGeom) -> (Vec<f32>, Vec<u32>) {
        let (mut o, mut a) = (Vec::new(), Vec::new());
        for oi in 0..g.out_h {
            for oj in 0..g.out_w {
                let at = |ki: usize, kj: usize| (2 * oi + ki) * g.in_w + 2 * oj + kj;
                let mut best = at(0, 0);
                for tap in [at(0, 1), at(1, 0), at(1, 1)] {
                    let (v, b) = (src[tap], src[best]);
                    if v > b || (v.is_nan() && !b.is_nan()) {
                        best = tap;
                    }
                }
                o.push(src[best]);
                a.push(best as u32);
            }
        }
        (o, a)
    }

    /// The definition of the backward: each gradient added onto zeros at its argmax (none where
    /// the argmax is outside the plane).
    fn backward_definition(grad: &[f32], arg: &[u32], plane: usize) -> Vec<f32> {
        let mut d = vec![0.0f32; plane];
        for (&gv, &at) in grad.iter().zip(arg) {
            if let Some(slot) = d.get_mut(at as usize) {
                *slot += gv;
            }
        }
        d
    }

    /// `len` values of one of four kinds: few distinct values (ties, `-0` against `+0`), negative
    /// values only, a few NaNs (of both signs) and infinities among random ones, random ones.
    fn values(len: usize, kind: u32, seed: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                let h = crate::rng::pcg_hash(i.wrapping_mul(7919) ^ seed.wrapping_mul(104_729) ^ kind << 28);
                let random = (h % 2001) as f32 / 100.0 - 10.0;
                match kind {
                    0 => [-1.0, -0.0, 0.0, 1.0][(h % 4) as usize],
                    1 => -1.0 - (h % 5) as f32,
                    2 => match h % 23 {
                        0 => f32::NAN,
                        1 => -f32::NAN,
                        2 => f32::INFINITY,
                        3 => f32::NEG_INFINITY,
                        _ => random,
                    },
                    _ => random,
                }
            })
            .collect()
    }

    fn same_bits(what: &str, got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (x, y)) in got.iter().zip(want).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "{what}: element {i}: {x} against {y}");
        }
    }

    /// Plane sizes: odd and even, rows of 1 to 33 windows (one and several runs, runs that end
    /// mid-vector, exactly 8 and 16).
    fn sizes() -> Vec<(usize, usize)> {
        let widths = [2, 3, 4, 5, 9, 10, 15, 16, 17, 18, 28, 31, 32, 33, 34, 35, 47, 66, 67];
        [2, 3, 5, 6, 7].into_iter().flat_map(|h| widths.map(|w| (h, w))).collect()
    }

    #[test]
    fn every_path_matches_the_definition() {
        for (h, w) in sizes() {
            let g = geom(1, 1, h, w);
            for kind in 0..4 {
                let src = values(h * w, kind, (h * 100 + w) as u32);
                let (want_o, want_a) = forward_definition(&src, &g);
                let grad = values(g.out_h * g.out_w, kind, 1 + (h * 100 + w) as u32);
                let want_d = backward_definition(&grad, &want_a, h * w);
                for isa in isas() {
                    let what = format!("{h}x{w} kind {kind} {isa:?}");
                    let n = g.out_h * g.out_w;
                    let (mut o, mut a) = (vec![f32::NAN; n], vec![7; n]);
                    forward_plane(isa, &src, &g, &mut o, &mut a);
                    same_bits(&format!("{what} values"), &o, &want_o);
                    assert_eq!(a, want_a, "{what} argmax");
                    let mut d = vec![f32::NAN; h * w];
                    let takes = isa != Isa::Baseline && g.out_w >= MIN_BACKWARD_WIDTH;
                    assert_eq!(backward_plane(isa, &grad, &a, &g, &mut d), takes, "{what}");
                    if takes {
                        same_bits(&format!("{what} gradient"), &d, &want_d);
                    }
                }
            }
        }
    }

    #[test]
    fn an_argmax_outside_its_window_is_reported_and_scattered() {
        let g = geom(2, 3, 7, 35);
        let (plane, out) = (7 * 35, g.out_h * g.out_w);
        let x = values(2 * 3 * plane, 3, 9);
        let (_, arg) = max_pool2d(&x, &g).unwrap();
        let grad = values(arg.len(), 2, 10);
        // Each plane gets one argmax elsewhere: in the neighbouring window, past the plane (none),
        // in a cell of no window.
        let mut bad = arg.clone();
        for (p, a) in bad.chunks_mut(out).enumerate() {
            let i = (p * 5) % out;
            a[i] = match p % 3 {
                0 => a[(i + 1) % out],
                1 => u32::MAX,
                _ => 34,
            };
        }
        for (p, (gr, a)) in grad.chunks(out).zip(bad.chunks(out)).enumerate() {
            for isa in isas() {
                let mut d = vec![0.0; plane];
                assert!(!backward_plane(isa, gr, a, &g, &mut d), "plane {p} {isa:?}");
            }
        }
        buffer_pool::give_back(vec![f32::NAN; 2 * 3 * plane]);
        let got = max_pool2d_backward(&grad, &bad, &g).unwrap();
        for (p, (gr, a)) in grad.chunks(out).zip(bad.chunks(out)).enumerate() {
            same_bits(&format!("plane {p}"), &got[p * plane..][..plane], &backward_definition(gr, a, plane));
        }
    }

    #[test]
    fn whole_tensors_match_the_definition_on_one_thread_and_many() {
        // LeNet's two pools at batch 3 (small enough for one thread) and the first at batch 8
        // (split across threads), and an odd size across threads.
        for (n, c, h, w) in [(3, 6, 28, 28), (3, 16, 10, 10), (8, 6, 28, 28), (5, 7, 33, 41)] {
            let g = geom(n, c, h, w);
            let (plane, out) = (h * w, g.out_h * g.out_w);
            let x = values(n * c * plane, 2, (h * w) as u32);
            let grad = values(n * c * out, 3, 5);
            buffer_pool::give_back(vec![f32::NAN; n * c * out]);
            let (o, a) = max_pool2d(&x, &g).unwrap();
            buffer_pool::give_back(vec![f32::NAN; n * c * plane]);
            let d = max_pool2d_backward(&grad, &a, &g).unwrap();
            for p in 0..n * c {
                let what = format!("[{n}, {c}, {h}, {w}] plane {p}");
                let (want_o, want_a) = forward_definition(&x[p * plane..][..plane], &g);
                same_bits(&what, &o[p * out..][..out], &want_o);
                assert_eq!(&a[p * out..][..out], &want_a[..], "{what}");
                let want_d = backward_definition(&grad[p * out..][..out], &want_a, plane);
                same_bits(&what, &d[p * plane..][..plane], &want_d);
            }
        }
    }
}
