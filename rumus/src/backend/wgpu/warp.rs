//! `affine_warp.wgsl`: per-sample affine resampling of NCHW images, one thread per output
//! element.

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, Storage, WarpArgs};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "affine_warp";

kernel_params! {
    /// `affine_warp.wgsl`: the image sizes and whether to interpolate bilinearly.
    struct WarpParams {
        batch: u32,
        channels: u32,
        height: u32,
        width: u32,
        bilinear: u32,
    } pad 3
}

impl WgpuBackend {
    pub(super) fn affine_warp_kernel(&self, x: &Storage, matrices: &Storage, a: &WarpArgs) -> Result<Storage> {
        let len = crate::layout::checked_numel(OP, &[a.batch, a.channels, a.height, a.width])?;
        let dims = [a.batch, a.channels, a.height, a.width];
        if u32::try_from(len).is_err() || dims.iter().any(|d| i32::try_from(*d).is_err()) {
            return Err(Error::invalid(OP, format!("{dims:?} exceeds the kernel's 32-bit indices")));
        }
        let (x, m) = (self.gpu(x, DType::F32, OP)?, self.gpu(matrices, DType::F32, OP)?);
        check_len(OP, x, len)?;
        check_len(OP, m, a.batch * 6)?;
        let out = self.alloc(len, DType::F32, OP)?;
        if len > 0 {
            let p = WarpParams {
                batch: a.batch as u32,
                channels: a.channels as u32,
                height: a.height as u32,
                width: a.width as u32,
                bilinear: a.bilinear as u32,
                _pad: [0; 3],
            };
            let groups = self.groups_for(len, OP)?;
            self.run(&pipelines::AFFINE_WARP, "affine_warp", &[R, R, W], &p, &[bind(x), bind(m), bind(&out)], groups)?;
        }
        Ok(self.output(out))
    }
}
