//! Which samples each rank takes.

/// Rank `rank`'s share of `order` for data-parallel steps: `order` cut into global batches of
/// `batch · size` samples (an incomplete last one dropped), of each the `rank`-th slice of
/// `batch` samples. Rank `r`'s `k`-th batch is thus the `r`-th part of the `k`-th global batch.
pub(crate) fn shard_global_batches(order: &[usize], batch: usize, rank: usize, size: usize) -> Vec<usize> {
    let global = batch.saturating_mul(size).max(1);
    order.chunks_exact(global).flat_map(|g| g[rank * batch..(rank + 1) * batch].iter().copied()).collect()
}

/// The contiguous part `rank` of `size` of `0..len` (the first `len % size` parts one longer).
pub(crate) fn shard_range(len: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
    let (base, extra) = (len / size, len % size);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_batches_are_cut_into_rank_slices_and_the_tail_is_dropped() {
        let order: Vec<usize> = (0..11).collect();
        assert_eq!(shard_global_batches(&order, 2, 0, 2), [0, 1, 4, 5]);
        assert_eq!(shard_global_batches(&order, 2, 1, 2), [2, 3, 6, 7]);
        assert_eq!(shard_global_batches(&order, 4, 0, 1), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(shard_global_batches(&order, 6, 1, 2).is_empty());
    }

    #[test]
    fn ranges_cover_everything_once() {
        for len in 0..9 {
            for size in 1..4 {
                let parts: Vec<usize> = (0..size).flat_map(|r| shard_range(len, r, size)).collect();
                assert_eq!(parts, (0..len).collect::<Vec<_>>());
            }
        }
    }
}
