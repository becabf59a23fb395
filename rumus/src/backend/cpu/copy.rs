//! Strided copies on the host: gathering a view into a row-major buffer and writing into a
//! sub-view. Axes that are contiguous in both layouts are merged first, so a copy is a loop over
//! rows of the innermost merged axis; rows with unit stride on both sides are `memcpy`s, and a
//! large copy into a contiguous destination is split across threads by rows.

use rayon::prelude::*;

use super::parallel::PAR_THRESHOLD;
use crate::Layout;

/// One merged axis of a copy: its extent and its strides in the source and the destination.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    len: usize,
    src: usize,
    dst: usize,
}

/// The copy's axes, outermost first, with unit axes dropped and neighbours that are contiguous
/// in both layouts merged (at least one axis).
fn merged_axes(src: &Layout, dst: &Layout) -> Vec<Axis> {
    let mut axes: Vec<Axis> = Vec::with_capacity(src.rank());
    let all = src.shape().iter().zip(src.strides()).zip(dst.strides());
    for ((&len, &src), &dst) in all.filter(|((&len, _), _)| len != 1) {
        if let Some(outer) = axes.last_mut() {
            if src.checked_mul(len) == Some(outer.src) && dst.checked_mul(len) == Some(outer.dst) {
                *outer = Axis { len: outer.len * len, src, dst };
                continue;
            }
        }
        axes.push(Axis { len, src, dst });
    }
    if axes.is_empty() {
        axes.push(Axis { len: 1, src: 0, dst: 0 });
    }
    axes
}

/// The source offset of row `row` (an index over every axis but the innermost).
fn row_offsets(outer: &[Axis], mut row: usize, index: &mut [usize]) -> (usize, usize) {
    let (mut s, mut d) = (0usize, 0usize);
    for (axis, i) in outer.iter().zip(index.iter_mut()).rev() {
        *i = row % axis.len;
        row /= axis.len;
        s += *i * axis.src;
        d += *i * axis.dst;
    }
    (s, d)
}

/// Copies `rows` rows starting at row `first`. `src_at` is the source offset of row 0 and
/// `dst_at` the destination offset of row `first` within `dst`.
fn copy_rows<T: Copy>(
    src: &[T],
    src_at: usize,
    dst: &mut [T],
    dst_at: usize,
    axes: &[Axis],
    first: usize,
    rows: usize,
) {
    let Some((inner, outer)) = axes.split_last() else { return };
    let mut index = vec![0usize; outer.len()];
    let (s0, _) = row_offsets(outer, first, &mut index);
    // Offsets advance by wrapping steps: within a chunk the destination is relative to row
    // `first`, so an axis wrapping round may step below 0 before the next step returns.
    let (mut s, mut d) = (src_at + s0, dst_at);
    let n = inner.len;
    for _ in 0..rows {
        if inner.src == 1 && inner.dst == 1 {
            dst[d..d + n].copy_from_slice(&src[s..s + n]);
        } else {
            for i in 0..n {
                dst[d + i * inner.dst] = src[s + i * inner.src];
            }
        }
        for (axis, i) in outer.iter().zip(index.iter_mut()).rev() {
            *i += 1;
            s = s.wrapping_add(axis.src);
            d = d.wrapping_add(axis.dst);
            if *i < axis.len {
                break;
            }
            *i = 0;
            s = s.wrapping_sub(axis.len * axis.src);
            d = d.wrapping_sub(axis.len * axis.dst);
        }
    }
}

/// Gathers `src` viewed through `src_layout` and scatters into `dst` viewed through
/// `dst_layout` (same shape; both already checked against their buffers).
pub fn copy_strided<T: Copy + Send + Sync>(src: &[T], src_layout: &Layout, dst: &mut [T], dst_layout: &Layout) {
    let len = src_layout.numel();
    if len == 0 {
        return;
    }
    if src_layout.is_contiguous() && dst_layout.is_contiguous() {
        dst[dst_layout.offset()..][..len].copy_from_slice(&src[src_layout.offset()..][..len]);
        return;
    }
    let axes = merged_axes(src_layout, dst_layout);
    let inner = axes[axes.len() - 1].len;
    let rows = len / inner;
    let (src_at, dst_at) = (src_layout.offset(), dst_layout.offset());
    if len < PAR_THRESHOLD || !dst_layout.is_contiguous() || rows < 2 {
        copy_rows(src, src_at, dst, dst_at, &axes, 0, rows);
        return;
    }
    // A contiguous destination is row after row: hand each task a run of whole rows.
    let rows_per_task = (PAR_THRESHOLD / inner).max(1);
    dst[dst_at..][..len].par_chunks_mut(rows_per_task * inner).enumerate().for_each(|(task, chunk)| {
        copy_rows(src, src_at, chunk, 0, &axes, task * rows_per_task, chunk.len() / inner);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element-by-element definition.
    fn reference(src: &[f32], src_layout: &Layout, dst: &mut [f32], dst_layout: &Layout) {
        let shape = src_layout.shape();
        for flat in 0..src_layout.numel() {
            let (mut s, mut d, mut rest) = (src_layout.offset(), dst_layout.offset(), flat);
            for axis in (0..shape.len()).rev() {
                let i = rest % shape[axis];
                rest /= shape[axis];
                s += i * src_layout.strides()[axis];
                d += i * dst_layout.strides()[axis];
            }
            dst[d] = src[s];
        }
    }

    fn check(src_layout: Layout, dst_layout: Layout, dst_len: usize) {
        let src: Vec<f32> = (0..src_layout.max_index().map_or(0, |m| m + 1)).map(|i| i as f32).collect();
        let (mut got, mut want) = (vec![-1.0; dst_len], vec![-1.0; dst_len]);
        copy_strided(&src, &src_layout, &mut got, &dst_layout);
        reference(&src, &src_layout, &mut want, &dst_layout);
        assert_eq!(got, want, "{src_layout:?} -> {dst_layout:?}");
    }

    #[test]
    fn permuted_narrowed_and_broadcast_views_copy_like_the_definition() {
        // Head split: [n, t, 3e] narrowed to one third, viewed [n, t, h, d], permuted to [n, h, t, d].
        for (n, t, h, d) in [(2, 5, 3, 4), (3, 64, 4, 32), (12, 64, 4, 32)] {
            let e = h * d;
            let qkv = Layout::contiguous(&[n, t, 3 * e]);
            let k = qkv.narrow(2, e, 2 * e).unwrap();
            let split = Layout::new(vec![n, t, h, d], vec![t * 3 * e, 3 * e, d, 1], k.offset()).unwrap();
            let src = split.permute(&[0, 2, 1, 3]).unwrap();
            check(src.clone(), Layout::contiguous(&[n, h, t, d]), n * t * e);
            // ...and back into the narrowed window of a full-size buffer.
            let window = Layout::new(vec![n, h, t, d], src.strides().to_vec(), src.offset()).unwrap();
            check(Layout::contiguous(&[n, h, t, d]), window, n * t * 3 * e);
        }
        // Transposes with a strided innermost axis, small and large.
        for (r, c) in [(3, 7), (300, 257)] {
            check(Layout::contiguous(&[r, c]).permute(&[1, 0]).unwrap(), Layout::contiguous(&[c, r]), r * c);
        }
        // Broadcast (stride 0) sources and unit axes.
        let b = Layout::new(vec![4, 1, 9000], vec![0, 5, 1], 3).unwrap();
        check(b, Layout::contiguous(&[4, 1, 9000]), 36_000);
        let row = Layout::new(vec![50_000, 3], vec![1, 0], 0).unwrap();
        check(row, Layout::contiguous(&[50_000, 3]), 150_000);
        check(Layout::new(vec![1, 1], vec![0, 0], 2).unwrap(), Layout::contiguous(&[1, 1]), 1);
    }
}
