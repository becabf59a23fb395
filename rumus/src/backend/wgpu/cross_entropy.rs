//! `cross_entropy.wgsl`: fused (label-smoothed) cross-entropy of `[rows, classes]` logits
//! against class indices, forward and backward; the targets are range-checked
//! (`index_check.rs`).

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::reduce::SHORT_ROW;
use super::storage::WgpuStorage;
use super::WgpuBackend;
use crate::backend::{CrossEntropyArgs, DType, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "cross_entropy";

/// Bindings of both entry points: logits, targets, class weights, per-row gradients, output,
/// index flag.
const SIGNATURE: [Access; 6] = [R, R, R, R, W, W];

/// `flags` bits, injected into the shader as `OP_WEIGHTED` and `OP_IGNORE`.
const FLAG_WEIGHTED: u32 = 1;
const FLAG_IGNORE: u32 = 2;

/// The constants placed before `cross_entropy.wgsl`.
pub(super) fn cross_entropy_constants() -> String {
    super::elementwise::op_constants([("weighted", FLAG_WEIGHTED), ("ignore", FLAG_IGNORE)])
}

kernel_params! {
    /// `rows` rows of `classes` logits, with label smoothing `smoothing`, the ignored target
    /// `ignore_index` and `flags` (`FLAG_WEIGHTED`, `FLAG_IGNORE`).
    struct CrossEntropyParams {
        rows: u32,
        classes: u32,
        smoothing: f32,
        neg_inf: f32,
        ignore_index: u32,
        flags: u32,
    } pad 2
}

fn params(args: &CrossEntropyArgs) -> CrossEntropyParams {
    let flags =
        if args.weighted { FLAG_WEIGHTED } else { 0 } | if args.ignore_index.is_some() { FLAG_IGNORE } else { 0 };
    CrossEntropyParams {
        rows: args.rows as u32,
        classes: args.classes as u32,
        smoothing: args.smoothing,
        neg_inf: f32::NEG_INFINITY,
        ignore_index: args.ignore_index.unwrap_or(0),
        flags,
        _pad: [0; 2],
    }
}

impl WgpuBackend {
    /// The weights' buffer (checked against `args`), or `None` when unweighted.
    fn class_weights<'a>(
        &self,
        weights: Option<&'a Storage>,
        args: &CrossEntropyArgs,
    ) -> Result<Option<&'a WgpuStorage>> {
        if weights.is_some() != args.weighted {
            return Err(Error::invalid(OP, "the weight storage and the arguments disagree"));
        }
        weights
            .map(|w| {
                let w = self.gpu(w, DType::F32, OP)?;
                check_len(OP, w, args.classes)?;
                Ok(w)
            })
            .transpose()
    }

    pub(super) fn cross_entropy_kernel(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        let (x, t) = (self.gpu(logits, DType::F32, OP)?, self.gpu(targets, DType::U32, OP)?);
        let w = self.class_weights(weights, args)?;
        check_len(OP, x, args.rows * args.classes)?;
        check_len(OP, t, args.rows)?;
        if args.classes == 0 {
            return Err(Error::invalid(OP, "zero classes"));
        }
        let out = self.alloc(args.rows * args.outputs_per_row(), DType::F32, OP)?;
        let (entry, groups) = if args.classes <= SHORT_ROW {
            ("cross_entropy_short", self.groups_for(args.rows, OP)?)
        } else {
            ("cross_entropy", self.groups_rows(args.rows))
        };
        // The forward does not read per-row gradients, nor weights when unweighted: the logits
        // fill those bindings.
        self.checked_indices(OP, t, args.classes, || {
            let buffers = [bind(x), bind(t), bind(w.unwrap_or(x)), bind(x), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &SIGNATURE, &params(args), &buffers, groups)
        })?;
        Ok(self.output(out))
    }

    pub(super) fn cross_entropy_backward_kernel(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage> {
        let (x, t, g) = (
            self.gpu(logits, DType::F32, OP)?,
            self.gpu(targets, DType::U32, OP)?,
            self.gpu(grad_rows, DType::F32, OP)?,
        );
        let w = self.class_weights(weights, args)?;
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
            let buffers = [bind(x), bind(t), bind(w.unwrap_or(x)), bind(g), bind(&out), self.index_flag.binding()];
            self.run(&pipelines::CROSS_ENTROPY, entry, &SIGNATURE, &params(args), &buffers, groups)
        })?;
        Ok(self.output(out))
    }
}
