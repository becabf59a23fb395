//! The kernel interface every backend implements.
//!
//! Ops (in `crate::ops`) validate shapes, make inputs contiguous where a kernel needs it and
//! record autograd; they then call one of these kernels on the tensor's device. A backend only
//! moves numbers: it never sees autograd and never checks user input beyond its own limits.

pub mod cpu;
mod kernel_args;
mod storage;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use kernel_args::*;
pub use storage::{DType, Storage};

use crate::{Layout, Result};

/// Kernels of one device. Every input storage is contiguous from element 0 unless a layout is
/// passed with it; every output is a fresh contiguous storage.
pub trait Backend: Send + Sync {
    /// Human-readable device name, used in messages.
    fn name(&self) -> String;

    // ----- memory -----
    // `from_*` builds device storage from host data; the backend is the factory, hence `&self`.
    #[allow(clippy::wrong_self_convention)]
    /// Copies host values into new device storage (f32, row-major as given).
    fn from_f32(&self, data: &[f32]) -> Result<Storage>;
    #[allow(clippy::wrong_self_convention)]
    /// Copies host indices into new device storage (u32: class targets, token ids, gather indices).
    fn from_u32(&self, data: &[u32]) -> Result<Storage>;
    /// Reads `layout`'s elements (in row-major order) back to the host.
    fn to_f32(&self, src: &Storage, layout: &Layout) -> Result<Vec<f32>>;
    /// As [`Backend::to_f32`], for u32 storage.
    fn to_u32(&self, src: &Storage, layout: &Layout) -> Result<Vec<u32>>;
    /// `len` elements of `value`.
    fn full(&self, len: usize, value: f32) -> Result<Storage>;
    /// Copies the elements of `src` viewed through `src_layout` into `dst` viewed through
    /// `dst_layout` (same shape). Gathers strided views and writes into sub-views.
    fn copy_strided(&self, src: &Storage, src_layout: &Layout, dst: &Storage, dst_layout: &Layout) -> Result<()>;
    /// The f32 elements of `src` viewed through `layout`, row-major, in a fresh storage (what
    /// `contiguous` makes of a view). By default a zero-filled storage written by
    /// [`copy_strided`](Self::copy_strided); a backend may skip the fill.
    fn gather_f32(&self, src: &Storage, layout: &Layout) -> Result<Storage> {
        let out = self.full(layout.numel(), 0.0)?;
        self.copy_strided(src, layout, &out, &Layout::contiguous(layout.shape()))?;
        Ok(out)
    }
    /// Counter-based random numbers: the same (seed, len) gives the same values on every backend.
    fn random(&self, kind: RandomKind, len: usize, seed: u64) -> Result<Storage>;

    // ----- elementwise -----
    /// `op` applied to each of the first `len` elements of contiguous `x`; a new contiguous storage.
    fn unary(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage>;
    /// `grad * d op(x)/dx`, given the input `x` and output `y` of the forward.
    fn unary_backward(&self, op: UnaryOp, x: &Storage, y: &Storage, grad: &Storage, len: usize) -> Result<Storage>;
    /// Elementwise `lhs op rhs`; both layouts already broadcast to the output shape.
    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage>;

    // ----- reductions -----
    /// Reduces the middle axis of `x` viewed as `[outer, len, inner]`.
    fn reduce(&self, op: ReduceOp, x: &Storage, dims: ReduceDims) -> Result<Storage>;
    /// Index (u32) of the largest element along the middle axis of `[outer, len, inner]`.
    fn argmax(&self, x: &Storage, dims: ReduceDims) -> Result<Storage>;

    // ----- linear algebra -----
    /// Batched `lhs @ rhs` with arbitrary strides (transposed and broadcast operands are free).
    fn matmul(&self, lhs: &Storage, rhs: &Storage, args: &MatmulArgs) -> Result<Storage>;

    // ----- softmax family (rows of the last axis) -----
    /// Softmax (or, with `log`, log-softmax) of each row of contiguous `[rows, cols]`, stable for
    /// large logits (the row maximum is subtracted first).
    fn softmax(&self, x: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage>;
    /// Given the forward output `y` and the incoming gradient.
    fn softmax_backward(&self, y: &Storage, grad: &Storage, rows: usize, cols: usize, log: bool) -> Result<Storage>;
    /// Per-row cross-entropy of contiguous logits `[rows, classes]` against u32 class targets
    /// `[rows]` (see [`CrossEntropyArgs`]), with `weights` `[classes]` when `args.weighted`:
    /// the rows' losses, then, with weights or an ignored value, the rows' weights (`w[t]`, 0 for
    /// an ignored row): [`CrossEntropyArgs::outputs_per_row`] values per row.
    /// A target `>= classes` that is not `ignore_index` is [`Error::IndexOutOfRange`](crate::Error).
    fn cross_entropy(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        args: &CrossEntropyArgs,
    ) -> Result<Storage>;
    /// Gradient w.r.t. the logits `[rows, classes]`, given the incoming gradient of each row's
    /// loss (`grad_rows`, `rows` values); 0 on ignored rows.
    fn cross_entropy_backward(
        &self,
        logits: &Storage,
        targets: &Storage,
        weights: Option<&Storage>,
        grad_rows: &Storage,
        args: &CrossEntropyArgs,
    ) -> Result<Storage>;

    // ----- attention (see [`AttentionArgs`]) -----
    /// Fused attention: the output (`batch · tq · d` elements where `args.layout` puts them) and
    /// the log-sum-exp of each query's scaled scores `[batch, tq]` (natural log, saved for the
    /// backward), without a score matrix in memory; `None` where the backend has no fused kernel
    /// for these sizes (the op then composes matmul and softmax on the same device). With
    /// [`AttentionLayout::Packed`], `q`, `k` and `v` are one storage.
    fn attention_forward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        args: &AttentionArgs,
    ) -> Result<Option<(Storage, Storage)>>;
    /// Backward of [`Backend::attention_forward`] (only called where it returned a result): one
    /// storage holding `dq`, `dk` and `dv` (`args.grads_len()` elements, at
    /// [`AttentionArgs::grad_offsets`]) from the inputs, the forward's output and log-sum-exp,
    /// and the output's gradient `dout` (laid out as the output), recomputing the scores tile by
    /// tile; deterministic (no atomics).
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        q: &Storage,
        k: &Storage,
        v: &Storage,
        out: &Storage,
        lse: &Storage,
        dout: &Storage,
        args: &AttentionArgs,
    ) -> Result<Storage>;

    // ----- layer normalisation (rows of the last axis, see [`LayerNormArgs`]) -----
    /// `y = (x - mean)·rstd·weight + bias` per row of `x [rows, cols]` (`weight`, `bias`:
    /// `[cols]`, each optional), with each row's mean and `rstd = 1/√(var + eps)` (biased
    /// variance), `[rows]` each, saved for the backward.
    fn layer_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage, Storage)>;
    /// The gradient w.r.t. `x` of [`Backend::layer_norm`] given `dy`:
    /// `dx = rstd·(g - mean(g) - x̂·mean(g·x̂))` per row, with `g = dy·weight` and
    /// `x̂ = (x - mean)·rstd`.
    fn layer_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage>;
    /// The parameter gradients of [`Backend::layer_norm`] given `dy`: `(dweight, dbias)`, `[cols]`
    /// each, `dweight = Σ_rows dy·x̂` and `dbias = Σ_rows dy` with `x̂ = (x - mean)·rstd` from the
    /// forward's statistics, in one pass over `x` and `dy` (all contiguous from their starts);
    /// each column's rows are summed in an order fixed by the shape (the same bits run to run).
    fn layer_norm_param_grads(
        &self,
        x: &Storage,
        mean: &Storage,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<(Storage, Storage)>;

    // ----- batch normalisation (channels of `[N, C, inner]`, see [`BatchNormArgs`]) -----
    /// Whether [`Backend::batch_norm`], [`Backend::batch_norm_backward`] and
    /// [`Backend::batch_norm_update_running`] are implemented;
    /// where not, the op composes batch norm from elementwise ops and reductions.
    fn fuses_batch_norm(&self) -> bool {
        false
    }
    /// `y = (x - mean)·rstd·weight + bias` per channel of `x [batch, channels, inner]`, with
    /// `rstd = 1/√(var + eps)` and `weight`, `bias` `[channels]` (each optional). With
    /// `args.batch_stats` the mean and biased variance are the batch's own and `stats` is
    /// ignored; otherwise `stats` holds them (`(mean, var)`, `[channels]` each). With
    /// `args.relu` it writes `max(0, y)` instead (the ReLU in the same pass). Returns
    /// `(y, mean, var)`, the statistics used. By default an error: see
    /// [`Backend::fuses_batch_norm`].
    fn batch_norm(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        stats: Option<(&Storage, &Storage)>,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        let _ = (x, weight, bias, stats, args);
        Err(crate::Error::invalid("batch_norm", format!("no fused batch norm on {}", self.name())))
    }
    /// The gradients `(dx, dweight, dbias)` of [`Backend::batch_norm`] given `dy`, the
    /// statistics it used (`mean`, `var`) and the same `args`: with `x̂ = (x - mean)·rstd`,
    /// `dweight = Σ dy·x̂` and `dbias = Σ dy` per channel, and `dx = weight·rstd·(dy - Σdy/M -
    /// x̂·Σdy·x̂/M)` (`M = batch·inner`) with batch statistics, `weight·rstd·dy` without. With
    /// `args.relu` the gradient of the ReLU'd output: `dy` is first zeroed wherever the forward's
    /// `x̂·weight + bias ≤ 0`, recomputed from `x` as the forward computed it (so `bias` is
    /// read only then). By default an error: see [`Backend::fuses_batch_norm`].
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        bias: Option<&Storage>,
        mean: &Storage,
        var: &Storage,
        dy: &Storage,
        args: &BatchNormArgs,
    ) -> Result<(Storage, Storage, Storage)> {
        let _ = (x, weight, bias, mean, var, dy, args);
        Err(crate::Error::invalid("batch_norm", format!("no fused batch norm on {}", self.name())))
    }
    /// Moves the running statistics `running_mean` and `running_var` (`[channels]` each, updated
    /// in place) towards a batch's `mean` and biased `var` (as [`Backend::batch_norm`] returns
    /// them for the same `args`): `(1 - momentum)·running + momentum·batch`, the variance made
    /// unbiased (times `count / (count - 1)`, `count = args.count()`). The four storages must be
    /// distinct. By default an error: see [`Backend::fuses_batch_norm`].
    fn batch_norm_update_running(
        &self,
        running_mean: &Storage,
        running_var: &Storage,
        mean: &Storage,
        var: &Storage,
        momentum: f32,
        args: &BatchNormArgs,
    ) -> Result<()> {
        let _ = (running_mean, running_var, mean, var, momentum, args);
        Err(crate::Error::invalid("batch_norm", format!("no fused batch norm on {}", self.name())))
    }

    // ----- RMS normalisation (rows of the last axis, see [`LayerNormArgs`]) -----
    /// `y = x·rstd·weight` per row of `x [rows, cols]` (`weight` `[cols]`, optional), with
    /// `rstd = 1/√(mean(x²) + eps)` per row, `[rows]`, saved for the backward.
    fn rms_norm(&self, x: &Storage, weight: Option<&Storage>, args: &LayerNormArgs) -> Result<(Storage, Storage)>;
    /// The gradient w.r.t. `x` of [`Backend::rms_norm`] given `dy`:
    /// `dx = rstd·(g - x̂·mean(g·x̂))` per row, with `g = dy·weight` and `x̂ = x·rstd`.
    fn rms_norm_backward(
        &self,
        x: &Storage,
        weight: Option<&Storage>,
        rstd: &Storage,
        dy: &Storage,
        args: &LayerNormArgs,
    ) -> Result<Storage>;

    // ----- recurrent cells over whole sequences (see [`RecurrentArgs`] for the layouts) -----
    /// One direction of an LSTM or GRU layer over `args.steps` steps: the pre-activations are
    /// `xproj[t] + b_hh + W_hh·h` (the GRU's `n` gate takes `r ⊙ (W_hn·h + b_hn)`), `w_hh_t`
    /// is `W_hh` transposed `[hidden, G·hidden]`, `c0` is given for the LSTM only. Returns the
    /// packed result `[batch, steps + states, hidden]` (outputs in time order, `h_n`, then the
    /// LSTM's `c_n`) and the saved values `[batch, steps, saved·hidden]`.
    fn recurrent_forward(
        &self,
        xproj: &Storage,
        w_hh_t: &Storage,
        b_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Storage)>;
    /// Backpropagation through time of [`Backend::recurrent_forward`] given the gradient of the
    /// packed result: `(dgx, dgh, dh0, dc0)`, the gradients of the pre-activations on the input
    /// side and (GRU only; the LSTM's are `dgx`) on the recurrent side, each
    /// `[batch, steps, G·hidden]` in time order, and those of `h0` and (LSTM only) `c0`.
    /// `w_hh` is `[G·hidden, hidden]`; `packed` is the forward's result.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn recurrent_backward(
        &self,
        dpacked: &Storage,
        saved: &Storage,
        packed: &Storage,
        w_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        args: &RecurrentArgs,
    ) -> Result<(Storage, Option<Storage>, Storage, Option<Storage>)>;

    // ----- resampling (NCHW) -----
    /// `x [n, c, h, w]` resampled through one affine map per sample, `matrices [n, 6]` (see
    /// [`WarpArgs`]): a new `[n, c, h, w]`, zero where the source falls outside the image.
    fn affine_warp(&self, x: &Storage, matrices: &Storage, args: &WarpArgs) -> Result<Storage>;

    // ----- convolution and pooling (NCHW) -----
    /// `[n, c, h, w]` → columns `[n, c*kh*kw, oh*ow]`.
    fn im2col(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// Adjoint of `im2col`: columns `[n, c*kh*kw, oh*ow]` summed back into `[n, c, h, w]`.
    fn col2im(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// Fused convolution (see [`Conv2dArgs`]) plus an optional bias `[o]`, or `None` where the
    /// backend has none: the op then composes `im2col`, `matmul` and a broadcast add.
    fn conv2d(
        &self,
        x: &Storage,
        weight: &Storage,
        bias: Option<&Storage>,
        args: &Conv2dArgs,
    ) -> Result<Option<Storage>> {
        let _ = (x, weight, bias, args);
        Ok(None)
    }
    /// Backward of a fused [`Backend::conv2d`]: the gradients in `wanted`. Only called on
    /// backends whose `conv2d` returned a result.
    fn conv2d_backward(
        &self,
        x: &Storage,
        weight: &Storage,
        grad: &Storage,
        args: &Conv2dArgs,
        wanted: Conv2dWanted,
    ) -> Result<Conv2dGrads<Storage>> {
        let _ = (x, weight, grad, args, wanted);
        Err(crate::Error::invalid("conv2d", format!("backend {} has no fused conv2d backward", self.name())))
    }
    /// Returns the pooled values and the flat input index (u32, per plane) of each maximum.
    fn max_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<(Storage, Storage)>;
    /// Gradient of max pooling: each output gradient added at the input position `argmax` recorded
    /// (several windows may pick one input); output `[batch, channels, in_h, in_w]`.
    fn max_pool2d_backward(&self, grad: &Storage, argmax: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// Average pooling; padding counts as zeros in the divisor (PyTorch's default).
    fn avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// Gradient of average pooling: each output gradient spread evenly over its window (divisor
    /// `kernel_h · kernel_w`, padding included); output `[batch, channels, in_h, in_w]`.
    fn avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// PyTorch's adaptive average pooling windows: `[floor(i*h/oh), ceil((i+1)*h/oh))`.
    fn adaptive_avg_pool2d(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage>;
    /// Gradient of adaptive average pooling: each output gradient spread over its window, divided by
    /// that window's size; output `[batch, channels, in_h, in_w]`.
    fn adaptive_avg_pool2d_backward(&self, grad: &Storage, geom: &ConvGeom) -> Result<Storage>;

    // ----- indexing -----
    /// `x` viewed as `[outer, len, inner]`; picks `idx` (u32) along the middle axis.
    fn index_select(&self, x: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage>;
    /// Adjoint of `index_select`: scatter-adds `grad` rows into zeros of `[outer, len, inner]`.
    fn index_add(&self, grad: &Storage, idx: &Storage, args: &IndexArgs) -> Result<Storage>;
    /// `x` viewed as `[outer, len, inner]`, `idx` as `[outer, k, inner]`: `out[o, j, i] = x[o, idx[o, j, i], i]`.
    fn gather(&self, x: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage>;
    /// Adjoint of `gather`.
    fn scatter_add(&self, grad: &Storage, idx: &Storage, args: &GatherArgs) -> Result<Storage>;

    // ----- optimizers (in place) -----
    /// Fused updates of several parameters and their state buffers, with the result of applying
    /// them one after another in the order given (a backend may run many in one kernel launch,
    /// as PyTorch's `foreach` optimizers do). A gradient may share memory with what its own or
    /// an earlier update writes; each update's parameter and state buffers must be apart.
    fn optimizer_steps(&self, updates: &[OptimizerUpdate<'_>]) -> Result<()>;

    /// One fused update of a parameter and its state buffers: [`Backend::optimizer_steps`] of one.
    fn optimizer_step(
        &self,
        step: &OptimizerStep,
        param: &Storage,
        grad: &Storage,
        state: &[&Storage],
        len: usize,
    ) -> Result<()> {
        self.optimizer_steps(&[OptimizerUpdate { step: *step, param, grad, state, len }])
    }
    /// Unscales a gradient for dynamic loss scaling and checks it for overflow, in one pass (what
    /// PyTorch's internal `torch._amp_foreach_non_finite_check_and_unscale_` does per tensor):
    /// returns a new contiguous f32 storage of `len` elements, `grad[i] · inv_scale`, reading
    /// the first `len` elements of `grad` (contiguous, from its start). Sets element 0 of
    /// `found_non_finite` (a u32 storage of at least one element, written in place) to a nonzero
    /// value if some `grad[i]` is NaN or ±infinite, or its product with `inv_scale` overflows to
    /// ±infinite (only possible for `inv_scale > 1`); leaves it untouched otherwise, so one flag
    /// zeroed by the caller accumulates over many gradients. `found_non_finite` must not share
    /// memory with `grad`.
    fn unscale_grad(&self, grad: &Storage, len: usize, inv_scale: f32, found_non_finite: &Storage) -> Result<Storage>;
    /// The sum of the squares of every element of several f32 storages, each read from its start
    /// for its `len` elements: a new storage of one f32 element, accumulated in an order fixed by
    /// the lengths alone (the same bits run to run). Gradient clipping's global norm in one pass
    /// per storage and one reduction for all of them (PyTorch's `_foreach_norm`). An empty list,
    /// or storages of no elements, give 0.
    fn sum_squares(&self, tensors: &[(&Storage, usize)]) -> Result<Storage>;
}
