//! `fill.wgsl`: a storage of one value (zeros are cleared by the encoder, with no kernel).

use super::launch::bind;
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, Storage};
use crate::Result;

kernel_params! {
    /// `n` words of `value` (an f32's bits).
    struct FillParams {
        n: u32,
        value: u32,
    } pad 2
}

impl WgpuBackend {
    pub(super) fn fill_kernel(&self, len: usize, value: f32) -> Result<Storage> {
        if value.to_bits() == 0 {
            return Ok(self.output(self.zeroed(len, DType::F32, "full")?));
        }
        let out = self.alloc(len, DType::F32, "full")?;
        let params = FillParams { n: len as u32, value: value.to_bits(), _pad: [0; 2] };
        self.run(&pipelines::FILL, "fill", &[Access::Write], &params, &[bind(&out)], self.groups_for(len, "full")?)?;
        Ok(self.output(out))
    }
}
