//! `grad_unscale.wgsl`: dynamic loss scaling's unscale-and-check of one gradient, one dispatch
//! that writes `grad · inv_scale` and raises a u32 flag, in place, on NaN or infinite values.

use super::launch::{bind, check_len, WG};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "unscale_grad";

kernel_params! {
    /// `n` elements, each multiplied by `inv_scale`.
    struct GradUnscaleParams {
        n: u32,
        inv_scale: f32,
    } pad 2
}

impl WgpuBackend {
    pub(super) fn unscale_grad_kernel(
        &self,
        grad: &Storage,
        len: usize,
        inv_scale: f32,
        found_non_finite: &Storage,
    ) -> Result<Storage> {
        let g = self.gpu(grad, DType::F32, OP)?;
        let flag = self.gpu(found_non_finite, DType::U32, OP)?;
        check_len(OP, g, len)?;
        check_len(OP, flag, 1)?;
        let n = u32::try_from(len).map_err(|_| Error::invalid(OP, format!("{len} elements exceed 2^32 - 1")))?;
        let out = self.alloc(len, DType::F32, OP)?;
        if len > 0 {
            // The kernel walks the elements with a grid stride: no more workgroups than one
            // dispatch dimension holds, whatever the length.
            let groups = self.groups_rows(len.div_ceil(WG));
            // The kernel may write 1 into the flag: the bound the index checks trust (the
            // largest value the host knows of) must cover it.
            flag.set_bound(flag.bound().map(|b| b.max(1)));
            let params = GradUnscaleParams { n, inv_scale, _pad: [0; 2] };
            let buffers = [bind(g), bind(&out), bind(flag)];
            self.run(&pipelines::GRAD_UNSCALE, "grad_unscale", &[R, W, W], &params, &buffers, groups)?;
        }
        Ok(self.output(out))
    }
}
