//! Inverted dropout. The keep-mask is drawn on the tensor's device from the counter-based
//! generator, so a seed gives the same mask on every backend and nothing visits the host.

use crate::backend::RandomKind;
use crate::tensor::RawTensor;
use crate::{Error, Result};

impl RawTensor {
    /// Zeroes each element with probability `p` and scales the survivors by `1/(1-p)`, so the
    /// expected value is unchanged. The identity when `training` is false or `p` is 0.
    pub fn dropout(&self, p: f32, training: bool, seed: u64) -> Result<RawTensor> {
        const OP: &str = "dropout";
        self.check_f32(OP)?;
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid(OP, format!("probability {p} must be in [0, 1]")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            // Everything is dropped; multiplying keeps the graph (and a zero gradient).
            return self.mul(&RawTensor::zeros(&[], self.device())?);
        }
        // keep where u > p (probability 1-p), scaled by 1/(1-p): drawn, compared and scaled in one
        // kernel.
        let kind = RandomKind::KeepMask { p, scale: 1.0 / (1.0 - p) };
        let mask = RawTensor::from_kernel(
            self.device().backend().random(kind, self.numel(), seed)?,
            self.shape(),
            self.device(),
        );
        self.mul(&mask)
    }
}
