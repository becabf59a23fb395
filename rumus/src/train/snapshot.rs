//! Copies of a module's weights kept on their devices, to restore later (best weights of
//! early stopping, the last good weights when the loss turns NaN).

use crate::nn::{named_params, Module, Param};
use crate::{RawTensor, Result};

/// A device-side copy of every parameter and buffer of a module.
pub struct WeightSnapshot {
    copies: Vec<(Param, RawTensor)>,
}

impl WeightSnapshot {
    /// Copies the current values (a device-to-device copy, no host transfer).
    pub fn take(module: &dyn Module) -> Result<Self> {
        let copies = named_params(module)
            .into_iter()
            .map(|(_, param)| {
                let copy = param.tensor().detached_copy()?;
                Ok((param, copy))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(WeightSnapshot { copies })
    }

    /// Writes the saved values back into the parameters they were taken from.
    pub fn restore(&self) -> Result<()> {
        for (param, copy) in &self.copies {
            param.assign(copy)?;
        }
        Ok(())
    }
}
