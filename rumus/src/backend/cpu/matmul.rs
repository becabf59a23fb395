//! Batched matmul through the `gemm` crate, which takes arbitrary strides, so transposed and
//! batch-broadcast operands never need a copy.

use rayon::prelude::*;

use crate::backend::{MatmulArgs, MatrixLayout};

/// Products smaller than this (m·n·k) run one per thread across the batch instead of splitting
/// each product across threads. Handing a product of a few million FMAs to the pool costs more
/// than it saves: an MLP step at batch 64 (products of 15M) took 1.2-1.3 ms split, 1.0 ms not
/// (2 threads, development machine).
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

/// Largest element index a layout touches within one batch entry.
fn extent(l: &MatrixLayout, rows: usize, cols: usize, batch: usize) -> usize {
    l.offset
        + batch.saturating_sub(1) * l.batch_stride
        + rows.saturating_sub(1) * l.row_stride
        + cols.saturating_sub(1) * l.col_stride
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
) {
    let args = MatmulArgs { batch: 1, m, k, n, lhs: *l, rhs: *r };
    let dst = &mut dst[..m * n];
    if m * n == 0 {
        return;
    }
    if k == 0 {
        dst.fill(0.0);
        return;
    }
    assert!(extent(l, m, k, 1) < lhs.len(), "gemm: lhs layout out of bounds");
    assert!(extent(r, k, n, 1) < rhs.len(), "gemm: rhs layout out of bounds");
    // SAFETY: the asserts above bound every element the layouts address inside the slices.
    unsafe { gemm_one(dst, lhs[l.offset..].as_ptr(), l, rhs[r.offset..].as_ptr(), r, &args, threads) };
}

pub fn matmul(lhs: &[f32], rhs: &[f32], args: &MatmulArgs) -> Vec<f32> {
    let mn = args.m * args.n;
    // gemm overwrites every element (read_dst = false), so a stale pooled buffer will do.
    let mut out = super::pool::take(args.batch * mn);
    if mn == 0 || args.batch == 0 {
        return out;
    }
    if args.k == 0 {
        // An empty inner dimension sums nothing: the product is all zeros.
        out.fill(0.0);
        return out;
    }
    // The op layer builds these layouts from real tensor views; a violation is a bug in rumus.
    assert!(extent(&args.lhs, args.m, args.k, args.batch) < lhs.len(), "matmul: lhs layout out of bounds");
    assert!(extent(&args.rhs, args.k, args.n, args.batch) < rhs.len(), "matmul: rhs layout out of bounds");
    let threads = rayon::current_num_threads();
    let small = args.m * args.n * args.k < SPLIT_PRODUCT_FLOPS;
    let run = |b: usize, dst: &mut [f32], threads: usize| {
        let l = lhs[args.lhs.offset + b * args.lhs.batch_stride..].as_ptr();
        let r = rhs[args.rhs.offset + b * args.rhs.batch_stride..].as_ptr();
        // SAFETY: the asserts above bound every element the layouts address inside the slices.
        unsafe { gemm_one(dst, l, &args.lhs, r, &args.rhs, args, threads) };
    };
    if small && args.batch > 1 {
        out.par_chunks_mut(mn).enumerate().for_each(|(b, dst)| run(b, dst, 1));
    } else {
        for (b, dst) in out.chunks_mut(mn).enumerate() {
            run(b, dst, if small { 1 } else { threads });
        }
    }
    out
}
