//! Batched matmul through the `gemm` crate, which takes arbitrary strides, so transposed and
//! batch-broadcast operands never need a copy.

use rayon::prelude::*;

use crate::backend::{MatmulArgs, MatrixLayout};
use crate::{Error, Result};

/// Products smaller than this (m·n·k) run one per thread across the batch instead of splitting
/// each product across threads. Handing a product of a few million FMAs to the pool costs more
/// than it saves (BENCHMARKS.md).
const SPLIT_PRODUCT_FLOPS: usize = 1 << 24;

/// One `m×k @ k×n` product written into `dst` (row-major `m×n`).
///
/// # Safety
/// `lhs`/`rhs` with their layouts must address only elements inside the slices; `gemm` reads
/// exactly the `m×k` and `k×n` elements the strides describe and writes `dst` in full.
unsafe fn gemm_one(
    dst: &mut [f32],
    lhs: *const f32,
    l: &MatrixLayout,
    rhs: *const f32,
    r: &MatrixLayout,
    args: &MatmulArgs,
    threads: usize,
) {
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    gemm::gemm(
        args.m,
        args.n,
        args.k,
        dst.as_mut_ptr(),
        1,
        args.n as isize,
        false,
        lhs,
        l.col_stride as isize,
        l.row_stride as isize,
        rhs,
        r.col_stride as isize,
        r.row_stride as isize,
        0.0,
        1.0,
        false,
        false,
        false,
        parallelism,
    );
}

/// Largest element index a layout touches over `batch` entries of `rows×cols`, or `None` when
/// that index does not fit a `usize` (checked: this bound is what makes the unsafe gemm calls
/// sound, so it must not wrap).
fn extent(l: &MatrixLayout, rows: usize, cols: usize, batch: usize) -> Option<usize> {
    let last = |count: usize, stride: usize| count.saturating_sub(1).checked_mul(stride);
    l.offset
        .checked_add(last(batch, l.batch_stride)?)?
        .checked_add(last(rows, l.row_stride)?)?
        .checked_add(last(cols, l.col_stride)?)
}

/// `Ok` when every element `l` addresses over `batch` entries of `rows×cols` lies inside a slice
/// of `len` elements and every stride fits gemm's `isize`; otherwise an error naming `what`.
fn check_bounds(l: &MatrixLayout, (rows, cols, batch): (usize, usize, usize), len: usize, what: &str) -> Result<()> {
    let fits = extent(l, rows, cols, batch).is_some_and(|e| e < len)
        && [l.row_stride, l.col_stride, l.batch_stride].iter().all(|&s| isize::try_from(s).is_ok());
    if fits {
        return Ok(());
    }
    Err(Error::shape("matmul", format!("{what} layout {l:?} of {batch}x{rows}x{cols} exceeds its {len} elements")))
}

/// `m·n` output elements per product and the whole output, checked.
fn output_len(args: &MatmulArgs) -> Result<(usize, usize)> {
    let overflow = || Error::shape("matmul", format!("output {}x{}x{} overflows", args.batch, args.m, args.n));
    let mn = args.m.checked_mul(args.n).ok_or_else(overflow)?;
    Ok((mn, mn.checked_mul(args.batch).ok_or_else(overflow)?))
}

/// One `m×k @ k×n` product into `dst` (row-major `m×n`, overwritten), for kernels that split
/// their work across threads themselves (`threads` > 1 lets gemm split this product too).
pub(super) fn gemm_into(
    dst: &mut [f32],
    lhs: &[f32],
    l: &MatrixLayout,
    rhs: &[f32],
    r: &MatrixLayout,
    (m, k, n): (usize, usize, usize),
    threads: usize,
) -> Result<()> {
    let args = MatmulArgs { batch: 1, m, k, n, lhs: *l, rhs: *r };
    let (mn, _) = output_len(&args)?;
    let dst = dst.get_mut(..mn).ok_or_else(|| Error::shape("matmul", format!("output of {m}x{n} exceeds dst")))?;
    if mn == 0 {
        return Ok(());
    }
    if k == 0 {
        dst.fill(0.0);
        return Ok(());
    }
    check_bounds(l, (m, k, 1), lhs.len(), "lhs")?;
    check_bounds(r, (k, n, 1), rhs.len(), "rhs")?;
    // SAFETY: check_bounds put every element the layouts address (offset included) inside the
    // slices, with overflow-checked arithmetic, and dst holds the m×n outputs.
    unsafe { gemm_one(dst, lhs[l.offset..].as_ptr(), l, rhs[r.offset..].as_ptr(), r, &args, threads) };
    Ok(())
}

pub fn matmul(lhs: &[f32], rhs: &[f32], args: &MatmulArgs) -> Result<Vec<f32>> {
    let (mn, total) = output_len(args)?;
    // gemm overwrites every element (read_dst = false), so a stale pooled buffer will do.
    let mut out = super::buffer_pool::take("matmul", total)?;
    if mn == 0 || args.batch == 0 {
        return Ok(out);
    }
    if args.k == 0 {
        // An empty inner dimension sums nothing: the product is all zeros.
        out.fill(0.0);
        return Ok(out);
    }
    // The op layer builds these layouts from real tensor views, but the backend is public:
    // check every layout against its slice before any unsafe call.
    check_bounds(&args.lhs, (args.m, args.k, args.batch), lhs.len(), "lhs")?;
    check_bounds(&args.rhs, (args.k, args.n, args.batch), rhs.len(), "rhs")?;
    if args.n > isize::MAX as usize {
        return Err(Error::shape("matmul", format!("output row of {} elements", args.n)));
    }
    let threads = rayon::current_num_threads();
    // Saturating: only a size heuristic (the sizes were checked above).
    let small = mn.saturating_mul(args.k) < SPLIT_PRODUCT_FLOPS;
    let run = |b: usize, dst: &mut [f32], threads: usize| {
        let l = lhs[args.lhs.offset + b * args.lhs.batch_stride..].as_ptr();
        let r = rhs[args.rhs.offset + b * args.rhs.batch_stride..].as_ptr();
        // SAFETY: check_bounds put every element of every batch entry (offset + b·batch_stride
        // + row and column steps, overflow-checked) inside the slices; dst holds m×n outputs.
        unsafe { gemm_one(dst, l, &args.lhs, r, &args.rhs, args, threads) };
    };
    if small && args.batch > 1 {
        out.par_chunks_mut(mn).enumerate().for_each(|(b, dst)| run(b, dst, 1));
    } else {
        for (b, dst) in out.chunks_mut(mn).enumerate() {
            run(b, dst, if small { 1 } else { threads });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_beyond_their_slices_or_usize_are_errors_not_reads() {
        let data = vec![1.0f32; 16];
        let ok = MatrixLayout::row_major(4, 4);
        let args = |lhs: MatrixLayout, m: usize| MatmulArgs { batch: 1, m, k: 4, n: 4, lhs, rhs: ok };
        assert_eq!(matmul(&data, &data, &args(ok, 4)).unwrap(), vec![4.0; 16]);
        // The reshape of issue #27: (2^62 + 1) rows of 4, whose extent wraps to a small number.
        let huge = MatrixLayout { offset: 0, batch_stride: 0, row_stride: 4, col_stride: 1 };
        assert!(matmul(&data, &data, &args(huge, (1 << 62) + 1)).is_err());
        let wrapping = MatrixLayout { offset: usize::MAX - 2, batch_stride: 0, row_stride: 4, col_stride: 1 };
        assert!(matmul(&data, &data, &args(wrapping, 1)).is_err());
        let strided = MatrixLayout { offset: 0, batch_stride: 0, row_stride: usize::MAX / 2, col_stride: 1 };
        assert!(matmul(&data, &data, &args(strided, 2)).is_err());
        let mut dst = vec![0.0; 16];
        assert!(gemm_into(&mut dst, &data, &huge, &data, &ok, ((1 << 62) + 1, 4, 4), 1).is_err());
    }
}
