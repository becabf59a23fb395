//! `random.wgsl`: uniform and normal draws of the counter-based generator (`rng.rs`), and
//! dropout's keep-masks.

use super::launch::bind;
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, RandomKind, Storage};
use crate::{rng, Result};

kernel_params! {
    /// `n` draws under the stream `key` (`rng::seed_key`); a keep-mask keeps `scale` where the
    /// uniform draw is above `p`.
    struct RandomParams {
        n: u32,
        key: u32,
        p: f32,
        scale: f32,
    }
}

impl WgpuBackend {
    pub(super) fn random_kernel(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage> {
        kind.check_len(len)?;
        let out = self.alloc(len, DType::F32, "random")?;
        let (entry, p, scale) = match kind {
            RandomKind::Uniform => ("random_uniform", 0.0, 0.0),
            RandomKind::Normal => ("random_normal", 0.0, 0.0),
            RandomKind::KeepMask { p, scale } => ("random_keep_mask", p, scale),
        };
        let params = RandomParams { n: len as u32, key: rng::seed_key(seed), p, scale };
        let groups = self.groups_for(len, "random")?;
        self.run(&pipelines::RANDOM, entry, &[Access::Write], &params, &[bind(&out)], groups)?;
        Ok(self.output(out))
    }
}
