//! `cross_entropy.wgsl`: fused (label-smoothed) cross-entropy of `[rows, classes]` logits
//! against class indices, forward and backward; the targets are range-checked
//! (`index_check.rs`).

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::reduce::SHORT_ROW;
use super::WgpuBackend;
use crate::backend::{CrossEntropyArgs, DType, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "cross_entropy";

/// Bindings of both entry points: logits, targets, per-row gradients, output, index flag.
const SIGNATURE: [Access; 5] = [R, R, R, W, W];

kernel_params! {
    /// `rows` rows of `classes` logits, with label smoothing `smoothing`.
    struct CrossEntropyParams {
        rows: u32,
        classes: u32,
        smoothing: f32,
        neg_inf: f32,
    }
}

fn params(args: &CrossEntropyArgs) -> CrossEntropyParams {
    CrossEntropyParams {
        rows: args.rows as u32,
        classes: args.classes as u32,
        smoothing: args.smoothing,
        neg_inf: f32::NEG_INFINITY,
    }
}

impl WgpuBackend {
    pub(super) fn cross_entropy_kernel(
        &self,
        logits: &Storage,
        targets: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        let (x, t) = (self.gpu(logits, DType::F32, OP)?, self.gpu(targets, DType::U32, OP)?);
        check_len(OP, x, args.rows * args.classes)?;
        check_len(OP, t, args.rows)?;
        if args.classes == 0 {
            return Err(Error::invalid(OP, "zero classes"));
        }
        let out = self.alloc(args.rows, DType::F32, OP)?;
        let (entry, groups) = if args.classes <= SHORT_ROW {
            ("cross_entropy_short", self.groups_for(args.rows, OP)?)
        } else {
            ("cross_entropy", self.groups_rows(args.rows))
        };
        // The forward does not read per-row gradients; the logits fill that binding.
        self.checked_indices(OP, t, args.classes, || {
            let buffers = [bind(x), bind(t), bind(x), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &SIGNATURE, &params(args), &buffers, groups)
        })?;
        Ok(self.output(out))
    }

    pub(super) fn cross_entropy_backward_kernel(
        &self,
        logits: &Storage,
        targets: &Storage,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        let (x, t, g) = (
            self.gpu(logits, DType::F32, OP)?,
            self.gpu(targets, DType::U32, OP)?,
            self.gpu(grad_rows, DType::F32, OP)?,
        );
        check_len(OP, x, args.rows * args.classes)?;
        check_len(OP, t, args.rows)?;
        check_len(OP, g, args.rows)?;
        if args.classes == 0 {
            return Err(Error::invalid(OP, "zero classes"));
        }
        let out = self.alloc(args.rows * args.classes, DType::F32, OP)?;
        let (entry, groups) = if args.classes <= SHORT_ROW {
            ("cross_entropy_backward_short", self.groups_for(args.rows, OP)?)
        } else {
            ("cross_entropy_backward", self.groups_rows(args.rows))
        };
        self.checked_indices(OP, t, args.classes, || {
            let buffers = [bind(x), bind(t), bind(g), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &SIGNATURE, &params(args), &buffers, groups)
        })?;
        Ok(self.output(out))
    }
}
