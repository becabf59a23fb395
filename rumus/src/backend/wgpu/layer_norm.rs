//! `layer_norm.wgsl` and `layer_norm_backward.wgsl`: layer normalisation over the rows of
//! `[rows, cols]`, one workgroup per row; `layer_norm_param_grads.wgsl`: the weight and bias
//! gradients, one invocation per column and chunk of rows.

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{Backend, DType, LayerNormArgs, ReduceDims, ReduceOp, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "layer_norm";

kernel_params! {
    /// `layer_norm.wgsl`, `layer_norm_backward.wgsl` (and the `rms_norm` pair, without a bias):
    /// `rows` rows of `cols`, `eps`, and whether a weight and a bias are bound.
    struct LayerNormParams {
        rows: u32,
        cols: u32,
        eps: f32,
        has_weight: u32,
        has_bias: u32,
    } pad 3
}

kernel_params! {
    /// `layer_norm_param_grads.wgsl`: `rows` rows of `cols` in `chunks` chunks of `chunk_len`.
    struct ParamGradsParams {
        rows: u32,
        cols: u32,
        chunks: u32,
        chunk_len: u32,
    }
}

fn params(a: &LayerNormArgs, weight: bool, bias: bool) -> Result<LayerNormParams> {
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
        has_bias: bias as u32,
        _pad: [0; 3],
    })
}

impl WgpuBackend {
    /// An optional weight or bias of `cols` elements.
    fn feature<'a>(&self, s: Option<&'a Storage>, cols: usize) -> Result<Option<&'a super::WgpuStorage>> {
        let Some(s) = s else { return Ok(None) };
        let s = self.gpu(s, DType::F32, OP)?;
        check_len(OP, s, cols)?;
        Ok(Some(s))
    }

    pub(super) fn layer_norm_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        a: &LayerNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        let p = params(a, weight.is_some(), bias.is_some())?;
        let x = self.gpu(x, DType::F32, OP)?;
        check_len(OP, x, a.rows * a.cols)?;
        let (w, b) = (self.feature(weight, a.cols)?, self.feature(bias, a.cols)?);
        let y = self.alloc(a.rows * a.cols, DType::F32, OP)?;
        let mean = self.alloc(a.rows, DType::F32, OP)?;
        let rstd = self.alloc(a.rows, DType::F32, OP)?;
        if a.rows > 0 {
            let (w, b) = (w.map_or(self.unused(), bind), b.map_or(self.unused(), bind));
            let buffers = [bind(x), w, b, bind(&y), bind(&mean), bind(&rstd)];
            let groups = self.groups_rows(a.rows);
            self.run(&pipelines::LAYER_NORM, "layer_norm", &[R, R, R, W, W, W], &p, &buffers, groups)?;
        }
        Ok((self.output(y), self.output(mean), self.output(rstd)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn layer_norm_backward_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        a: &LayerNormArgs,
    ) -> Result<Storage> {
        let p = params(a, weight.is_some(), false)?;
        let (x, dy) = (self.gpu(x, DType::F32, OP)?, self.gpu(dy, DType::F32, OP)?);
        let (mean, rstd) = (self.gpu(mean, DType::F32, OP)?, self.gpu(rstd, DType::F32, OP)?);
        for (s, len) in [(x, a.rows * a.cols), (dy, a.rows * a.cols), (mean, a.rows), (rstd, a.rows)] {
            check_len(OP, s, len)?;
        }
        let w = self.feature(weight, a.cols)?;
        let dx = self.alloc(a.rows * a.cols, DType::F32, OP)?;
        if a.rows > 0 {
            let w = w.map_or(self.unused(), bind);
            let buffers = [bind(x), w, bind(mean), bind(rstd), bind(dy), bind(&dx)];
            let groups = self.groups_rows(a.rows);
            let signature = [R, R, R, R, R, W];
            self.run(&pipelines::LAYER_NORM_BACKWARD, "layer_norm_backward", &signature, &p, &buffers, groups)?;
        }
        Ok(self.output(dx))
    }

    /// [`Backend::layer_norm_param_grads`](crate::backend::Backend::layer_norm_param_grads): one
    /// pass writes each chunk of rows' partial sums of `dy·x̂` and `dy` per column, then a column
    /// reduction each sums the chunks.
    pub(super) fn layer_norm_param_grads_kernel(
        &self,
        x: &Storage,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        a: &LayerNormArgs,
    ) -> Result<(Storage, Storage)> {
        // The same checks of the shape and its 32-bit indices as the other kernels.
        params(a, false, false)?;
        let (x, dy) = (self.gpu(x, DType::F32, OP)?, self.gpu(dy, DType::F32, OP)?);
        let (mean, rstd) = (self.gpu(mean, DType::F32, OP)?, self.gpu(rstd, DType::F32, OP)?);
        for (s, len) in [(x, a.rows * a.cols), (dy, a.rows * a.cols), (mean, a.rows), (rstd, a.rows)] {
            check_len(OP, s, len)?;
        }
        // The rows split as a column reduction splits them; no chunk left empty.
        let chunk_len = super::reduce::column_chunks(a.rows, a.cols).1;
        let chunks = a.rows.div_ceil(chunk_len).max(1);
        let p = ParamGradsParams {
            rows: a.rows as u32,
            cols: a.cols as u32,
            chunks: chunks as u32,
            chunk_len: chunk_len as u32,
        };
        let partials = chunks * a.cols;
        let (pw, pb) = (self.alloc(partials, DType::F32, OP)?, self.alloc(partials, DType::F32, OP)?);
        if partials > 0 {
            let buffers = [bind(x), bind(mean), bind(rstd), bind(dy), bind(&pw), bind(&pb)];
            let groups = self.groups_for(partials, OP)?;
            let signature = [R, R, R, R, W, W];
            self.run(&pipelines::LAYER_NORM_PARAM_GRADS, "layer_norm_param_grads", &signature, &p, &buffers, groups)?;
        }
        let dims = ReduceDims { outer: 1, len: chunks, inner: a.cols };
        Ok((self.reduce(ReduceOp::Sum, &self.output(pw), dims)?, self.reduce(ReduceOp::Sum, &self.output(pb), dims)?))
    }
}
