//! Random fills from the counter-based generator (`rng.rs`): value `i` depends only on the seed
//! and `i`, so a long fill splits across threads without changing a bit.

use rayon::prelude::*;

use super::parallel::PAR_THRESHOLD;
use crate::backend::RandomKind;
use crate::rng;

/// Fills `values` with draws of `kind` under `seed`, value `i` at index `i`.
pub fn fill(kind: RandomKind, seed: u64, values: &mut [f32]) {
    let key = rng::seed_key(seed);
    let sample = move |i: usize| match kind {
        RandomKind::Uniform => rng::uniform(key, i as u32),
        RandomKind::Normal => rng::normal(key, i as u32),
        RandomKind::KeepMask { p, scale } => {
            if rng::uniform(key, i as u32) > p {
                scale
            } else {
                0.0
            }
        }
    };
    if values.len() >= PAR_THRESHOLD {
        values.par_iter_mut().enumerate().for_each(|(i, v)| *v = sample(i));
    } else {
        values.iter_mut().enumerate().for_each(|(i, v)| *v = sample(i));
    }
}
