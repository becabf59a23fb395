//! `rms_norm.wgsl` and `rms_norm_backward.wgsl`: RMS normalisation over the rows of
//! `[rows, cols]`, one workgroup per row (the parameters of the layer norm kernels).

use super::launch::{bind, check_len};
use super::layer_norm::LayerNormParams;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, LayerNormArgs, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "rms_norm";

fn params(a: &LayerNormArgs, weight: bool) -> Result<LayerNormParams> {
    a.check(OP)?;
    let elements = a.rows.saturating_mul(a.cols);
    if u32::try_from(elements).is_err() {
        return Err(Error::invalid(OP, format!("{elements} elements exceed the kernels' 32-bit indices")));
    }
    Ok(LayerNormParams {
        rows: a.rows as u32,
        cols: a.cols as u32,
        eps: a.eps,
        has_weight: weight as u32,
        has_bias: 0,
        _pad: [0; 3],
    })
}

impl WgpuBackend {
    /// An optional weight of `cols` elements.
    fn rms_weight<'a>(&self, s: Option<&'a Storage>, cols: usize) -> Result<Option<&'a super::WgpuStorage>> {
        let Some(s) = s else { return Ok(None) };
        let s = self.gpu(s, DType::F32, OP)?;
        check_len(OP, s, cols)?;
        Ok(Some(s))
    }

    pub(super) fn rms_norm_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        a: &LayerNormArgs,
    ) -> Result<(Storage, Storage)> {
        let p = params(a, weight.is_some())?;
        let x = self.gpu(x, DType::F32, OP)?;
        check_len(OP, x, a.rows * a.cols)?;
        let w = self.rms_weight(weight, a.cols)?;
        let y = self.alloc(a.rows * a.cols, DType::F32, OP)?;
        let rstd = self.alloc(a.rows, DType::F32, OP)?;
        if a.rows > 0 {
            let buffers = [bind(x), w.map_or(self.unused(), bind), bind(&y), bind(&rstd)];
            let groups = self.groups_rows(a.rows);
            self.run(&pipelines::RMS_NORM, "rms_norm", &[R, R, W, W], &p, &buffers, groups)?;
        }
        Ok((self.output(y), self.output(rstd)))
    }

    pub(super) fn rms_norm_backward_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        rstd: &Storage,
        dy: &Storage,
        a: &LayerNormArgs,
    ) -> Result<Storage> {
        let p = params(a, weight.is_some())?;
        let (x, dy, rstd) =
            (self.gpu(x, DType::F32, OP)?, self.gpu(dy, DType::F32, OP)?, self.gpu(rstd, DType::F32, OP)?);
        for (s, len) in [(x, a.rows * a.cols), (dy, a.rows * a.cols), (rstd, a.rows)] {
            check_len(OP, s, len)?;
        }
        let w = self.rms_weight(weight, a.cols)?;
        let dx = self.alloc(a.rows * a.cols, DType::F32, OP)?;
        if a.rows > 0 {
            let buffers = [bind(x), w.map_or(self.unused(), bind), bind(rstd), bind(dy), bind(&dx)];
            let groups = self.groups_rows(a.rows);
            let signature = [R, R, R, R, W];
            self.run(&pipelines::RMS_NORM_BACKWARD, "rms_norm_backward", &signature, &p, &buffers, groups)?;
        }
        Ok(self.output(dx))
    }
}
