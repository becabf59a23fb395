//! Attention heads with a key/value cache (splitting a packed `q, k, v` projection into heads and
//! merging them back are [`RawTensor::split_heads`] and [`RawTensor::merge_heads`]). Shared by
//! [`CausalSelfAttention`](super::CausalSelfAttention) and
//! [`MultiHeadAttention`](super::MultiHeadAttention).

use super::KvCache;
use crate::{Error, RawTensor, Result};

/// Attention of the new queries `q` over the cached keys and values followed by the new `k`,
/// `v` (all `[n, heads, t, d]`), which are appended to the layer's slot of `cache` (on the
/// device: one concatenation per step, no host copy). `causal` is aligned bottom-right, so each
/// new query sees every cached key and the new keys up to its own position.
pub(crate) fn attend_cached(
    op: &'static str,
    [q, k, v]: [RawTensor; 3],
    causal: bool,
    cache: &mut KvCache,
) -> Result<RawTensor> {
    let position = cache.position();
    let slot = cache.next_slot();
    let (k, v) = extend(op, slot.as_ref(), position, k, v)?;
    *slot = Some((k.clone(), v.clone()));
    q.scaled_dot_product_attention(&k, &v, causal)
}

/// The cached keys and values of a layer (`held`), checked against the cache's `position`,
/// followed along time by the new `k`, `v`.
fn extend(
    op: &'static str,
    held: Option<&(RawTensor, RawTensor)>,
    position: usize,
    k: RawTensor,
    v: RawTensor,
) -> Result<(RawTensor, RawTensor)> {
    let Some((cached_k, cached_v)) = held else {
        if position != 0 {
            return Err(Error::invalid(
                op,
                format!(
                    "the cache is at position {position} but holds no keys for this layer \
                     (a layer that did not run before, or a cache shared between models?)"
                ),
            ));
        }
        return Ok((k, v));
    };
    let count = cached_k.shape()[2];
    if count != position {
        return Err(Error::invalid(
            op,
            format!(
                "the cache is at position {position} but this layer holds {count} positions \
                 (was end_pass called once after each pass?)"
            ),
        ));
    }
    if cached_k.shape()[..2] != k.shape()[..2] {
        return Err(Error::shape(
            op,
            format!("new keys {:?} do not continue the cached keys {:?}", k.shape(), cached_k.shape()),
        ));
    }
    Ok((RawTensor::concat(&[cached_k, &k], 2)?, RawTensor::concat(&[cached_v, &v], 2)?))
}
