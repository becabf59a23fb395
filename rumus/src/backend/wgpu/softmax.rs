//! `softmax.wgsl` and `softmax_backward.wgsl`: (log-)softmax over the rows of `[rows, cols]`,
//! one invocation per short row and a workgroup per long one.

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::reduce::SHORT_ROW;
use super::WgpuBackend;
use crate::backend::{DType, Storage};
use crate::Result;

use Access::{Read as R, Write as W};

kernel_params! {
    /// `softmax.wgsl`: `rows` rows of `cols`, log-softmax when `log` is 1.
    struct SoftmaxParams {
        rows: u32,
        cols: u32,
        log: u32,
        neg_inf: f32,
    }
}

kernel_params! {
    /// `softmax_backward.wgsl`: the gradient through `rows` rows of `cols`.
    struct SoftmaxBackwardParams {
        rows: u32,
        cols: u32,
        log: u32,
        pad: u32,
    }
}

impl WgpuBackend {
    pub(super) fn softmax_kernel(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, "softmax")?;
        check_len("softmax", x, rows * cols)?;
        let out = self.alloc(rows * cols, DType::F32, "softmax")?;
        let params =
            SoftmaxParams { rows: rows as u32, cols: cols as u32, log: log as u32, neg_inf: f32::NEG_INFINITY };
        let (entry, groups) = if cols <= SHORT_ROW {
            ("softmax_short", self.groups_for(rows, "softmax")?)
        } else {
            ("softmax", self.groups_rows(rows))
        };
        self.run(&pipelines::SOFTMAX, entry, &[R, W], &params, &[bind(x), bind(&out)], groups)?;
        Ok(self.output(out))
    }

    pub(super) fn softmax_backward_kernel(
        &self,
        y: &Storage,
        grad: &Storage,
        rows: usize,
        cols: usize,
        log: bool,
    ) -> Result<Storage> {
        let (y, g) = (self.gpu(y, DType::F32, "softmax_backward")?, self.gpu(grad, DType::F32, "softmax_backward")?);
        check_len("softmax_backward", y, rows * cols)?;
        check_len("softmax_backward", g, rows * cols)?;
        let out = self.alloc(rows * cols, DType::F32, "softmax_backward")?;
        let params = SoftmaxBackwardParams { rows: rows as u32, cols: cols as u32, log: log as u32, pad: 0 };
        let (entry, groups) = if cols <= SHORT_ROW {
            ("softmax_backward_short", self.groups_for(rows, "softmax_backward")?)
        } else {
            ("softmax_backward", self.groups_rows(rows))
        };
        self.run(&pipelines::SOFTMAX_BACKWARD, entry, &[R, R, W], &params, &[bind(y), bind(g), bind(&out)], groups)?;
        Ok(self.output(out))
    }
}
