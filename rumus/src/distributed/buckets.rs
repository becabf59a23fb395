//! The gradient buckets of data-parallel training: which parameters' gradients travel together,
//! so each bucket's all-reduce starts while backward still computes the others (PyTorch DDP's
//! buckets).

/// The default bucket cap, in MiB of f32 gradients (PyTorch DDP's `bucket_cap_mb`).
pub(crate) const DEFAULT_BUCKET_CAP_MB: f32 = 25.0;

/// Groups parameters of `numels[i]` scalars each into buckets of at most `cap` scalars, in
/// reverse parameter order (backward finishes the last layers' gradients first): each bucket
/// is a run of consecutive indices, from the last parameter down to the first, closed when the
/// next parameter would take it past `cap`. A parameter larger than `cap` has a bucket of its
/// own. Every index is in exactly one bucket; no parameters give no bucket.
pub(crate) fn plan_buckets(numels: &[usize], cap: usize) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut size = 0usize;
    for i in (0..numels.len()).rev() {
        let n = numels[i];
        match buckets.last_mut() {
            Some(open) if size.saturating_add(n) <= cap => {
                open.push(i);
                size += n;
            }
            _ => {
                buckets.push(vec![i]);
                size = n;
            }
        }
    }
    buckets
}

/// A cap of `mb` MiB as a number of f32 scalars (at least 1; an infinite cap is `usize::MAX`).
pub(crate) fn cap_scalars(mb: f32) -> usize {
    let scalars = f64::from(mb) * 1024.0 * 1024.0 / 4.0;
    if scalars >= usize::MAX as f64 {
        usize::MAX
    } else {
        (scalars as usize).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_parameter_once_in_reverse_order_within_the_cap() {
        let mut rng = crate::rng::Rng::new(3);
        for case in 0..500 {
            let count = rng.below(40);
            let numels: Vec<usize> = (0..count).map(|_| 1 + rng.below(100)).collect();
            let cap = 1 + rng.below(250);
            let buckets = plan_buckets(&numels, cap);
            // Concatenated, the buckets are the indices from the last to the first.
            let flat: Vec<usize> = buckets.iter().flatten().copied().collect();
            assert_eq!(flat, (0..count).rev().collect::<Vec<_>>(), "case {case}: {numels:?} cap {cap}");
            for (b, bucket) in buckets.iter().enumerate() {
                assert!(!bucket.is_empty(), "case {case}: empty bucket {b}");
                let size: usize = bucket.iter().map(|&i| numels[i]).sum();
                assert!(size <= cap || bucket.len() == 1, "case {case}: bucket {b} of {size} > {cap}");
                // Closed only when the next parameter would not fit.
                if let Some(next) = buckets.get(b + 1) {
                    assert!(size + numels[next[0]] > cap, "case {case}: bucket {b} closed early");
                }
            }
        }
    }

    #[test]
    fn caps_in_mib_become_scalars() {
        assert_eq!(cap_scalars(25.0), 25 * 1024 * 1024 / 4);
        assert_eq!(cap_scalars(1e-9), 1);
        assert_eq!(cap_scalars(f32::INFINITY), usize::MAX);
        assert_eq!(plan_buckets(&[3, 4, 5], usize::MAX), vec![vec![2, 1, 0]]);
        assert!(plan_buckets(&[], 10).is_empty());
    }
}
