//! Per-channel normalisation of image batches.

use crate::{Error, RawTensor, Result};

/// `(x - mean[c]) / std[c]` for each channel `c` of `[n, c, h, w]`: torchvision's
/// `Normalize(mean, std)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalize {
    /// The mean subtracted from each channel.
    pub mean: Vec<f32>,
    /// The positive divisor of each channel.
    pub std: Vec<f32>,
}

impl Normalize {
    pub(crate) fn check(&self) -> Result<()> {
        if self.mean.is_empty() || self.mean.len() != self.std.len() {
            return Err(Error::invalid(
                "Normalize",
                format!(
                    "{} means and {} standard deviations: one of each per channel",
                    self.mean.len(),
                    self.std.len()
                ),
            ));
        }
        if let Some(m) = self.mean.iter().find(|m| !m.is_finite()) {
            return Err(Error::invalid("Normalize", format!("mean {m} is not finite")));
        }
        if let Some(s) = self.std.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::invalid("Normalize", format!("standard deviation {s} must be positive and finite")));
        }
        Ok(())
    }

    /// Applies it to `[n, c, h, w]` on the batch's device; `c` must be the channels given.
    pub(crate) fn apply(&self, x: &RawTensor) -> Result<RawTensor> {
        let c = x.shape()[1];
        if c != self.mean.len() {
            return Err(Error::shape(
                "Normalize",
                format!("input {:?}: {c} channels, but {} means and deviations", x.shape(), self.mean.len()),
            ));
        }
        let mean = RawTensor::from_slice(&self.mean, &[c, 1, 1], x.device())?;
        let std = RawTensor::from_slice(&self.std, &[c, 1, 1], x.device())?;
        x.sub(&mean)?.div(&std)
    }
}
