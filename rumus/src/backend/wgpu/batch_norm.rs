//! `batch_norm.wgsl` and `batch_norm_backward.wgsl`: batch normalisation over the channels of
//! `[batch, channels, inner]`. Each direction is three dispatches: per-channel partial sums
//! (each channel split over `chunks` workgroups so that a few large channels still fill the
//! GPU), their per-channel totals, and one elementwise pass (four values per invocation where
//! `inner` is a multiple of 4); the backward then copies `dweight` and `dbias` out of its
//! scratch buffer (within WebGPU's default of 8 storage buffers per kernel). The running statistics' update is one more, tiny, dispatch
//! (`batch_norm_running.wgsl`). A fused ReLU (`BatchNormArgs::relu`) adds no dispatch: the
//! forward's elementwise pass clamps, and the backward's passes mask `dy` by the forward's
//! output recomputed from `x` (which they read anyway) with the bias bound as the eighth
//! storage buffer.

use std::sync::Arc;

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{BatchNormArgs, DType, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "batch_norm";

/// Invocations of the partial-sum and per-channel kernels' workgroups (`RED_WG` of the
/// reduction preludes).
const RED_WG: usize = 64;
/// Values each invocation of the partial sums takes at least before a channel is split over
/// more workgroups...
const PER_INVOCATION: usize = 8;
/// ...and the most workgroups one channel is split over: one partial per invocation of the
/// totals' workgroup.
const MAX_CHUNKS: usize = RED_WG;

kernel_params! {
    /// `batch_norm.wgsl` and `batch_norm_backward.wgsl`: the shape (`count = batch·inner` values
    /// per channel), the chunks each channel is split over, `eps`, which of weight and bias are
    /// bound, whether the batch's own statistics normalise (the backward's extra terms), and
    /// the running statistics' update (`momentum`, `unbiased = count / (count - 1)`), and
    /// whether a ReLU is fused (`relu`).
    struct BatchNormParams {
        batch: u32,
        channels: u32,
        inner: u32,
        count: u32,
        chunks: u32,
        eps: f32,
        has_weight: u32,
        has_bias: u32,
        batch_stats: u32,
        momentum: f32,
        unbiased: f32,
        relu: u32,
    }
}

/// Workgroups each channel's sums are split over: enough that every invocation takes
/// [`PER_INVOCATION`] values, at most [`MAX_CHUNKS`].
fn chunks(a: &BatchNormArgs) -> usize {
    a.count().div_ceil(RED_WG * PER_INVOCATION).clamp(1, MAX_CHUNKS)
}

/// `entry[1]`, the kernel taking four adjacent values at a time, where `inner` is a multiple of
/// 4 (the four then lie in one run), else `entry[0]`.
fn four_wide(a: &BatchNormArgs, entry: [&'static str; 2]) -> &'static str {
    entry[a.inner.is_multiple_of(4) as usize]
}

fn params(a: &BatchNormArgs, weight: bool, bias: bool) -> Result<BatchNormParams> {
    a.check(OP)?;
    let elements = crate::layout::checked_numel(OP, &[a.batch, a.channels, a.inner])?;
    // Indices stay below 2^31 so that a walk's last step past the end cannot wrap around.
    if elements >= 1 << 31 {
        return Err(Error::invalid(OP, format!("{elements} elements exceed the kernels' 32-bit indices")));
    }
    let count = a.count();
    Ok(BatchNormParams {
        batch: a.batch as u32,
        channels: a.channels as u32,
        inner: a.inner as u32,
        count: count as u32,
        chunks: chunks(a) as u32,
        eps: a.eps,
        has_weight: weight as u32,
        has_bias: bias as u32,
        batch_stats: a.batch_stats as u32,
        momentum: 0.0,
        unbiased: count as f32 / (count.max(2) - 1) as f32,
        relu: a.relu as u32,
    })
}

impl WgpuBackend {
    /// An optional per-channel tensor (weight, bias) of `channels` elements.
    fn channel_tensor<'a>(&self, s: Option<&'a Storage>, channels: usize) -> Result<Option<&'a WgpuStorage>> {
        let Some(s) = s else { return Ok(None) };
        let s = self.gpu(s, DType::F32, OP)?;
        check_len(OP, s, channels)?;
        Ok(Some(s))
    }

    /// A fresh storage holding the `len` elements of `src` from element `at` (a copy, no kernel).
    fn copy_of(&self, src: &WgpuStorage, at: usize, len: usize) -> Result<Arc<WgpuStorage>> {
        check_len(OP, src, at + len)?;
        let out = self.alloc(len, DType::F32, OP)?;
        let (offset, bytes) = (at as u64 * 4, len as u64 * 4);
        self.recorder.record(&self.ctx, |enc| enc.copy_buffer_to_buffer(src.buffer(), offset, out.buffer(), 0, bytes));
        Ok(out)
    }

    /// Workgroups of the per-channel totals: one per channel (up to one dispatch dimension).
    fn channel_groups(&self, channels: usize) -> [u32; 3] {
        self.groups_rows(channels)
    }

    /// Workgroups and entry point of an elementwise pass over `len` values: four per
    /// invocation where `inner` is a multiple of 4.
    fn elementwise_groups(
        &self,
        a: &BatchNormArgs,
        len: usize,
        entry: [&'static str; 2],
    ) -> Result<([u32; 3], &'static str)> {
        let per = if a.inner.is_multiple_of(4) { 4 } else { 1 };
        Ok((self.groups_for(len / per, OP)?, four_wide(a, entry)))
    }

    pub(super) fn batch_norm_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        stats: Option<(&Storage, &Storage)>,
        a: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        let p = params(a, weight.is_some(), bias.is_some())?;
        let len = a.batch * a.channels * a.inner;
        let x = self.gpu(x, DType::F32, OP)?;
        check_len(OP, x, len)?;
        let (w, b) = (self.channel_tensor(weight, a.channels)?, self.channel_tensor(bias, a.channels)?);
        let y = self.alloc(len, DType::F32, OP)?;
        let features = || (w.map_or(self.unused(), bind), b.map_or(self.unused(), bind));
        let signature = [R, R, R, W, W, W, W];
        let (mean, var, partials) = if a.batch_stats {
            let (mean, var) = (self.alloc(a.channels, DType::F32, OP)?, self.alloc(a.channels, DType::F32, OP)?);
            let chunks = p.chunks as usize;
            let partials = self.alloc(2 * a.channels * chunks, DType::F32, OP)?;
            let (w, b) = features();
            let buffers = [bind(x), w, b, bind(&mean), bind(&var), bind(&partials), bind(&y)];
            let groups = [p.chunks, a.channels.min(self.max_groups) as u32, 1];
            let entry = four_wide(a, ["batch_norm_partials", "batch_norm_partials4"]);
            self.run(&pipelines::BATCH_NORM, entry, &signature, &p, &buffers, groups)?;
            let groups = self.channel_groups(a.channels);
            self.run(&pipelines::BATCH_NORM, "batch_norm_stats", &signature, &p, &buffers, groups)?;
            (mean, var, partials)
        } else {
            let Some((mean, var)) = stats else {
                return Err(Error::invalid(OP, "normalising without batch statistics needs the running ones"));
            };
            let (mean, var) = (self.gpu(mean, DType::F32, OP)?, self.gpu(var, DType::F32, OP)?);
            check_len(OP, mean, a.channels)?;
            check_len(OP, var, a.channels)?;
            // Copies: the statistics returned for the backward must not follow later updates
            // of the running ones in place (and nothing the caller holds is bound writable).
            let (mean, var) = (self.copy_of(mean, 0, a.channels)?, self.copy_of(var, 0, a.channels)?);
            (mean, var, self.alloc(1, DType::F32, OP)?)
        };
        let (w, b) = features();
        let buffers = [bind(x), w, b, bind(&mean), bind(&var), bind(&partials), bind(&y)];
        let (groups, entry) = self.elementwise_groups(a, len, ["batch_norm_apply", "batch_norm_apply4"])?;
        self.run(&pipelines::BATCH_NORM, entry, &signature, &p, &buffers, groups)?;
        Ok((self.output(y), self.output(mean), self.output(var)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn batch_norm_backward_kernel(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        mean: &Storage,
        var: &Storage,
        dy: &Storage,
        a: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        // The bias only shapes the fused ReLU's mask.
        let bias = if a.relu { bias } else { None };
        let p = params(a, weight.is_some(), bias.is_some())?;
        let len = a.batch * a.channels * a.inner;
        let (x, dy) = (self.gpu(x, DType::F32, OP)?, self.gpu(dy, DType::F32, OP)?);
        let (mean, var) = (self.gpu(mean, DType::F32, OP)?, self.gpu(var, DType::F32, OP)?);
        for (s, n) in [(x, len), (dy, len), (mean, a.channels), (var, a.channels)] {
            check_len(OP, s, n)?;
        }
        let w = self.channel_tensor(weight, a.channels)?.map_or(self.unused(), bind);
        let b = self.channel_tensor(bias, a.channels)?.map_or(self.unused(), bind);
        // The partial sums, then dbias and dweight (copied out at the end).
        let tail = 2 * a.channels * p.chunks as usize;
        let partials = self.alloc(tail + 2 * a.channels, DType::F32, OP)?;
        let dx = self.alloc(len, DType::F32, OP)?;
        let buffers = [bind(x), w, bind(mean), bind(var), bind(dy), bind(&partials), bind(&dx), b];
        let signature = [R, R, R, R, R, W, W, R];
        let shader = &pipelines::BATCH_NORM_BACKWARD;
        let groups = [p.chunks, a.channels.min(self.max_groups) as u32, 1];
        let entry = four_wide(a, ["batch_norm_backward_partials", "batch_norm_backward_partials4"]);
        self.run(shader, entry, &signature, &p, &buffers, groups)?;
        self.run(shader, "batch_norm_backward_stats", &signature, &p, &buffers, self.channel_groups(a.channels))?;
        let entries = ["batch_norm_backward_apply", "batch_norm_backward_apply4"];
        let (groups, entry) = self.elementwise_groups(a, len, entries)?;
        self.run(shader, entry, &signature, &p, &buffers, groups)?;
        let db = self.copy_of(&partials, tail, a.channels)?;
        let dw = self.copy_of(&partials, tail + a.channels, a.channels)?;
        Ok((self.output(dx), self.output(dw), self.output(db)))
    }

    /// The running statistics moved in place towards a batch's `mean` and biased `var`.
    pub(super) fn batch_norm_update_running_kernel(
        &self,
        running_mean: &Storage,
        running_var: &Storage,
        mean: &Storage,
        var: &Storage,
        momentum: f32,
        a: &BatchNormArgs,
    ) -> Result<()> {
        let p = BatchNormParams { momentum, ..params(a, false, false)? };
        let (rm, rv) = (self.gpu(running_mean, DType::F32, OP)?, self.gpu(running_var, DType::F32, OP)?);
        let (m, v) = (self.gpu(mean, DType::F32, OP)?, self.gpu(var, DType::F32, OP)?);
        for s in [rm, rv, m, v] {
            check_len(OP, s, a.channels)?;
        }
        if running_mean.same_memory(running_var)
            || [running_mean, running_var].iter().any(|r| r.same_memory(mean) || r.same_memory(var))
        {
            return Err(Error::invalid(OP, "the running statistics must be two storages apart from the batch's"));
        }
        let buffers = [bind(m), bind(v), bind(rm), bind(rv)];
        let groups = self.groups_for(a.channels, OP)?;
        self.run(&pipelines::BATCH_NORM_RUNNING, "batch_norm_running", &[R, R, W, W], &p, &buffers, groups)
    }
}
