//! Plain-data descriptions of kernel work, shared by every backend.

use super::Storage;

/// Elementwise functions of one tensor. Scalars ride along in the variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `|x|`
    Abs,
    /// `max(x, 0)`
    Relu,
    /// `x` where positive, `slope · x` elsewhere.
    LeakyRelu(f32),
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// GELU with the exact erf.
    Gelu,
    /// GELU with the tanh approximation.
    GeluTanh,
    /// `x · sigmoid(x)`
    Silu,
    /// `x + s`
    AddScalar(f32),
    /// `x * s`
    MulScalar(f32),
    /// `x ^ p`
    Powf(f32),
    /// `min(max(x, lo), hi)`
    Clamp(f32, f32),
}

impl UnaryOp {
    /// A stable small integer per variant (used as a kernel switch on the GPU).
    pub fn code(&self) -> u32 {
        match self {
            UnaryOp::Neg => 0,
            UnaryOp::Exp => 1,
            UnaryOp::Log => 2,
            UnaryOp::Sqrt => 3,
            UnaryOp::Abs => 4,
            UnaryOp::Relu => 5,
            UnaryOp::LeakyRelu(_) => 6,
            UnaryOp::Sigmoid => 7,
            UnaryOp::Tanh => 8,
            UnaryOp::Gelu => 9,
            UnaryOp::GeluTanh => 10,
            UnaryOp::Silu => 11,
            UnaryOp::AddScalar(_) => 12,
            UnaryOp::MulScalar(_) => 13,
            UnaryOp::Powf(_) => 14,
            UnaryOp::Clamp(_, _) => 15,
        }
    }

    /// The variant's scalars, zero where unused.
    pub fn scalars(&self) -> [f32; 2] {
        match *self {
            UnaryOp::LeakyRelu(a) | UnaryOp::AddScalar(a) | UnaryOp::MulScalar(a) | UnaryOp::Powf(a) => [a, 0.0],
            UnaryOp::Clamp(lo, hi) => [lo, hi],
            _ => [0.0, 0.0],
        }
    }

    /// The op's name in error messages and kernel logs (`"relu"`, `"add_scalar"` ...).
    pub fn name(&self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::LeakyRelu(_) => "leaky_relu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::AddScalar(_) => "add_scalar",
            UnaryOp::MulScalar(_) => "mul_scalar",
            UnaryOp::Powf(_) => "powf",
            UnaryOp::Clamp(_, _) => "clamp",
        }
    }
}

/// Elementwise functions of two tensors (NumPy broadcasting happens before the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `lhs + rhs`
    Add,
    /// `lhs - rhs`
    Sub,
    /// `lhs · rhs`
    Mul,
    /// `lhs / rhs`
    Div,
    /// The larger of the two.
    Maximum,
    /// The smaller of the two.
    Minimum,
    /// 1.0 where equal, else 0.0 (not differentiable; used by max/min backward).
    Eq,
    /// 1.0 where lhs > rhs, else 0.0.
    Gt,
    /// `max(lhs + rhs, 0)`: an add and the ReLU after it in one pass (a residual connection's
    /// sum and the block's ReLU, `RawTensor::add_relu`).
    AddRelu,
}

impl BinaryOp {
    /// A stable small integer per variant (the kernel's switch on the GPU).
    pub fn code(&self) -> u32 {
        *self as u32
    }

    /// The op's name in error messages (`"add"`, `"maximum"` ...).
    pub fn name(&self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Gt => "gt",
            BinaryOp::AddRelu => "add_relu",
        }
    }
}

/// How a reduction combines the elements along the reduced axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Their sum.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

/// A tensor viewed as `[outer, len, inner]`, reduced over `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceDims {
    /// Product of the axes before the reduced one(s).
    pub outer: usize,
    /// Elements reduced into each output.
    pub len: usize,
    /// Product of the axes after the reduced one(s) (the stride of `len`).
    pub inner: usize,
}

/// Where one matmul operand's elements sit: element `(b, i, j)` is at
/// `offset + b * batch_stride + i * row_stride + j * col_stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixLayout {
    /// Index of element `(0, 0, 0)`, in elements.
    pub offset: usize,
    /// Elements between consecutive matrices of the batch (0: one matrix broadcast).
    pub batch_stride: usize,
    /// Elements between consecutive rows.
    pub row_stride: usize,
    /// Elements between consecutive columns (1 unless transposed).
    pub col_stride: usize,
}

impl MatrixLayout {
    /// Row-major `[batch, rows, cols]`.
    pub fn row_major(rows: usize, cols: usize) -> Self {
        MatrixLayout { offset: 0, batch_stride: rows.saturating_mul(cols), row_stride: cols, col_stride: 1 }
    }
}

/// `out[b] = lhs[b] (m×k) @ rhs[b] (k×n)`, output contiguous `[batch, m, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulArgs {
    /// Number of independent products.
    pub batch: usize,
    /// Rows of `lhs` and of the output.
    pub m: usize,
    /// Columns of `lhs`, rows of `rhs`: the summed axis.
    pub k: usize,
    /// Columns of `rhs` and of the output.
    pub n: usize,
    /// Where the `[batch, m, k]` left operand's elements sit.
    pub lhs: MatrixLayout,
    /// Where the `[batch, k, n]` right operand's elements sit.
    pub rhs: MatrixLayout,
}

/// Cross-entropy of logits `[rows, classes]` against u32 class targets `[rows]`, per row, with
/// optional class weights `[classes]` and an ignored target value (PyTorch's `weight` and
/// `ignore_index`). Row `r` with target `t` (not ignored) has the loss
/// `(1-s)·w[t]·(lse - x[t]) + (s/classes)·Σ_j w[j]·(lse - x[j])` and the weight `w[t]`; an
/// ignored row has loss 0 and weight 0 (`w` is all ones when unweighted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropyArgs {
    /// Samples (or sequence positions), one target each.
    pub rows: usize,
    /// Logits per row; every target must be below it (or equal `ignore_index`).
    pub classes: usize,
    /// Label smoothing in `[0, 1)`: the target distribution is `(1-s)·onehot + s/classes`.
    pub smoothing: f32,
    /// Whether a `[classes]` weight storage is passed.
    pub weighted: bool,
    /// The target value whose rows are skipped (any u32, in range or not).
    pub ignore_index: Option<u32>,
}

impl CrossEntropyArgs {
    /// Values the forward writes per row: the loss, and the row's weight (the divisor of the
    /// mean) when weighted or ignoring.
    pub fn outputs_per_row(&self) -> usize {
        if self.weighted || self.ignore_index.is_some() {
            2
        } else {
            1
        }
    }
}

/// Fused scaled dot-product attention over `batch` independent heads of `d` features. Scores
/// are `q·k · scale`; with `causal`, query `i` sees keys `0 ..= i + (tk - tq)` (aligned
/// bottom-right, so `tq <= tk`). Where q, k, v and the output lie is `layout`'s; the gradients
/// `dq`, `dk`, `dv` go to one buffer ([`AttentionArgs::grad_offsets`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionArgs {
    /// Independent heads (batch × heads).
    pub batch: usize,
    /// Queries per head.
    pub tq: usize,
    /// Keys (and values) per head.
    pub tk: usize,
    /// Features per query, key and value.
    pub d: usize,
    /// Factor on the scores, usually `1/sqrt(d)`; must be finite.
    pub scale: f32,
    /// Whether query `i` is hidden from the keys after it (see the struct's doc).
    pub causal: bool,
    /// Where the tensors lie in their buffers.
    pub layout: AttentionLayout,
}

/// How the tensors of an attention lie in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionLayout {
    /// q and the output `[batch, tq, d]`, k and v `[batch, tk, d]`, each contiguous in a storage
    /// of its own; the gradients `[dq | dk | dv]` one after the other.
    Separate,
    /// A transformer's packed projection, read in place: one storage holds q, k and v as
    /// `[batch / heads, t, 3, heads, d]` (that is `[n, t, 3·heads·d]`, q then k then v along the
    /// last axis), the output is `[batch / heads, t, heads, d]` (the heads merged) and the
    /// gradients fill one storage shaped like the input. Head `b` is head `b % heads` of sequence
    /// `b / heads`; `tq == tk`.
    Packed {
        /// Heads per sequence.
        heads: usize,
    },
}

/// Where one tensor's rows lie: element `c` of row `i` of head `b` is at
/// `offset + (b / heads)·outer + (b % heads)·head + i·row + c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionRows {
    /// The first element.
    pub offset: usize,
    /// From one sequence to the next.
    pub outer: usize,
    /// From one head of a sequence to the next.
    pub head: usize,
    /// From one row to the next.
    pub row: usize,
}

impl AttentionRows {
    /// The first element of row `i` of head `b`.
    pub fn start(&self, b: usize, heads: usize, i: usize) -> usize {
        self.offset + (b / heads) * self.outer + (b % heads) * self.head + i * self.row
    }
}

impl AttentionArgs {
    /// Heads per sequence: 1 for [`AttentionLayout::Separate`].
    pub fn heads(&self) -> usize {
        match self.layout {
            AttentionLayout::Separate => 1,
            AttentionLayout::Packed { heads } => heads,
        }
    }

    /// The rows of q, k and v in their buffers (one buffer when packed).
    pub fn input_rows(&self) -> [AttentionRows; 3] {
        let d = self.d;
        match self.layout {
            AttentionLayout::Separate => {
                let rows = |t: usize| AttentionRows { offset: 0, outer: t * d, head: 0, row: d };
                [rows(self.tq), rows(self.tk), rows(self.tk)]
            }
            AttentionLayout::Packed { heads } => {
                let (e, t) = (heads * d, self.tq);
                let rows = |which: usize| AttentionRows { offset: which * e, outer: t * 3 * e, head: d, row: 3 * e };
                [rows(0), rows(1), rows(2)]
            }
        }
    }

    /// The rows of the output (and of its gradient).
    pub fn output_rows(&self) -> AttentionRows {
        let d = self.d;
        match self.layout {
            AttentionLayout::Separate => AttentionRows { offset: 0, outer: self.tq * d, head: 0, row: d },
            AttentionLayout::Packed { heads } => {
                AttentionRows { offset: 0, outer: self.tq * heads * d, head: d, row: heads * d }
            }
        }
    }

    /// Where `dq`, `dk` and `dv` begin in the gradients' buffer; each then has the strides of
    /// q, k and v (`input_rows`, offsets aside).
    pub fn grad_offsets(&self) -> [usize; 3] {
        match self.layout {
            AttentionLayout::Separate => {
                let (q, kv) = (self.batch * self.tq * self.d, self.batch * self.tk * self.d);
                [0, q, q + kv]
            }
            AttentionLayout::Packed { heads } => [0, heads * self.d, 2 * heads * self.d],
        }
    }

    /// Elements of q's, k's and v's buffers (one buffer when packed).
    pub fn input_lens(&self) -> [usize; 3] {
        match self.layout {
            AttentionLayout::Separate => {
                [self.batch * self.tq * self.d, self.batch * self.tk * self.d, self.batch * self.tk * self.d]
            }
            AttentionLayout::Packed { .. } => [self.batch * self.tq * 3 * self.d; 3],
        }
    }

    /// Elements of the output (and of its gradient): `batch · tq · d`.
    pub fn output_len(&self) -> usize {
        self.batch * self.tq * self.d
    }

    /// Elements of the gradients' buffer: `batch · (tq + 2·tk) · d`.
    pub fn grads_len(&self) -> usize {
        self.batch * (self.tq + 2 * self.tk) * self.d
    }

    /// `Ok` when every buffer the kernels touch has a valid element count, a causal pass has at
    /// least as many keys as queries and a packed layout's heads divide the batch (with as many
    /// keys as queries). Errors name `op`.
    pub fn check(&self, op: &'static str) -> crate::Result<()> {
        use crate::layout::checked_numel;
        checked_numel(op, &[self.batch, self.tq, self.d])?;
        checked_numel(op, &[self.batch, self.tk, self.d])?;
        checked_numel(op, &[self.batch, self.tq])?;
        // The gradients' buffer holds tq + 2·tk rows per head.
        let rows = self.tk.checked_mul(2).and_then(|keys| keys.checked_add(self.tq));
        let rows =
            rows.ok_or_else(|| crate::Error::invalid(op, format!("tq {} and tk {} overflow", self.tq, self.tk)))?;
        checked_numel(op, &[self.batch, rows, self.d])?;
        // One head's rows (the strides of the separate layout), even where the batch is empty.
        checked_numel(op, &[self.tq.max(self.tk), self.d])?;
        if self.causal && self.tq > self.tk {
            return Err(crate::Error::shape(
                op,
                format!("causal attention with {} queries needs at least as many keys, got {}", self.tq, self.tk),
            ));
        }
        if !self.scale.is_finite() {
            return Err(crate::Error::invalid(op, format!("scale {} is not finite", self.scale)));
        }
        if let AttentionLayout::Packed { heads } = self.layout {
            // A sequence's rows: t of 3·heads·d (its strides), even where the batch is empty.
            checked_numel(op, &[self.tq, 3, heads, self.d])?;
            if heads == 0 || !self.batch.is_multiple_of(heads) || self.tq != self.tk {
                return Err(crate::Error::shape(
                    op,
                    format!(
                        "a packed attention needs heads ({heads}) dividing the batch of heads ({}) and as many keys \
                         as queries ({} and {})",
                        self.batch, self.tk, self.tq
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The keys query `i` sees: `0 .. visible_keys(i)`.
    pub fn visible_keys(&self, i: usize) -> usize {
        if self.causal {
            (i + 1 + (self.tk - self.tq)).min(self.tk)
        } else {
            self.tk
        }
    }
}

/// Layer normalisation of each row of `[rows, cols]` with `eps` added to the (biased) variance;
/// RMS normalisation takes the same arguments, `eps` added to the mean square.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormArgs {
    /// Rows normalised independently.
    pub rows: usize,
    /// Elements per row (the normalised extent).
    pub cols: usize,
    /// Added to the variance before the square root; non-negative.
    pub eps: f32,
}

impl LayerNormArgs {
    /// `Ok` when `[rows, cols]` has a valid element count, rows are not empty and `eps` is a
    /// non-negative number. Errors name `op`.
    pub fn check(&self, op: &'static str) -> crate::Result<()> {
        crate::layout::checked_numel(op, &[self.rows, self.cols])?;
        if self.cols == 0 {
            return Err(crate::Error::shape(op, "rows of 0 elements have no mean"));
        }
        if self.eps.is_nan() || self.eps < 0.0 {
            return Err(crate::Error::invalid(op, format!("eps {} must be non-negative", self.eps)));
        }
        Ok(())
    }
}

/// A fused batch normalisation of contiguous `x [batch, channels, inner]`: statistics per
/// channel over the batch and the `inner` trailing elements (PyTorch's `[N, C, H·W]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormArgs {
    /// Samples (N).
    pub batch: usize,
    /// Channels (C), each with its own statistics.
    pub channels: usize,
    /// Elements per sample and channel (the product of the trailing axes; 1 for `[N, C]`).
    pub inner: usize,
    /// Added to the variance before the square root; non-negative.
    pub eps: f32,
    /// True: the batch's own mean and biased variance normalise it (training). False: given
    /// statistics (the running ones) do, and the backward treats them as constants.
    pub batch_stats: bool,
    /// A ReLU follows, fused into the same passes: the forward writes `max(0, y)` and the
    /// backward masks `dy` where `y ≤ 0`, `y` recomputed from `x`, the statistics, weight and
    /// bias (no saved output).
    pub relu: bool,
}

impl BatchNormArgs {
    /// Values normalised by each channel's statistics (`batch·inner`).
    pub fn count(&self) -> usize {
        self.batch * self.inner
    }

    /// `Ok` when `[batch, channels, inner]` has a valid element count, no axis is empty and
    /// `eps` is a non-negative number. Errors name `op`.
    pub fn check(&self, op: &'static str) -> crate::Result<()> {
        crate::layout::checked_numel(op, &[self.batch, self.channels, self.inner])?;
        if self.batch == 0 || self.channels == 0 || self.inner == 0 {
            return Err(crate::Error::shape(op, "an empty batch has no statistics"));
        }
        if self.eps.is_nan() || self.eps < 0.0 {
            return Err(crate::Error::invalid(op, format!("eps {} must be non-negative", self.eps)));
        }
        Ok(())
    }
}

/// Per-sample affine resampling of images `[batch, channels, height, width]` into the same
/// shape: each sample's six coefficients `[a, b, c, d, e, f]` map an output pixel `(x, y)`
/// (column, row) to the source position `(a·x + b·y + c, d·x + e·y + f)`, read by the nearest
/// pixel (`floor(s + 0.5)`) or bilinearly; sources outside the image read zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpArgs {
    /// Samples (N).
    pub batch: usize,
    /// Channels (C).
    pub channels: usize,
    /// Rows (H).
    pub height: usize,
    /// Columns (W).
    pub width: usize,
    /// Bilinear interpolation; nearest pixel otherwise.
    pub bilinear: bool,
}

/// Geometry of a 2-D sliding window over NCHW input: convolution, pooling and im2col share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Samples (N).
    pub batch: usize,
    /// Input channels (C).
    pub channels: usize,
    /// Input height (H).
    pub in_h: usize,
    /// Input width (W).
    pub in_w: usize,
    /// Window height.
    pub kernel_h: usize,
    /// Window width.
    pub kernel_w: usize,
    /// Vertical step between windows.
    pub stride_h: usize,
    /// Horizontal step between windows.
    pub stride_w: usize,
    /// Rows of padding above and below.
    pub pad_h: usize,
    /// Columns of padding left and right.
    pub pad_w: usize,
    /// Vertical spacing between window taps (1: dense).
    pub dilation_h: usize,
    /// Horizontal spacing between window taps (1: dense).
    pub dilation_w: usize,
    /// Output height (see [`ConvGeom::out_extent`]).
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
}

impl ConvGeom {
    /// A square `kernel` swept over `[batch, channels, h, w]` with the same stride, padding and
    /// dilation along both axes, or `None` when it does not fit or fails [`ConvGeom::check`].
    pub fn square(
        batch: usize,
        channels: usize,
        (h, w): (usize, usize),
        kernel: usize,
        stride: usize,
        pad: usize,
        dilation: usize,
    ) -> Option<ConvGeom> {
        Some(ConvGeom {
            batch,
            channels,
            in_h: h,
            in_w: w,
            kernel_h: kernel,
            kernel_w: kernel,
            stride_h: stride,
            stride_w: stride,
            pad_h: pad,
            pad_w: pad,
            dilation_h: dilation,
            dilation_w: dilation,
            out_h: Self::out_extent(h, kernel, stride, pad, dilation)?,
            out_w: Self::out_extent(w, kernel, stride, pad, dilation)?,
        })
        .filter(|g| g.check("conv").is_ok())
    }

    /// `Ok` when every buffer a kernel derives from this geometry has a valid element count
    /// (see [`checked_numel`](crate::layout::checked_numel)): the input, the output, the im2col
    /// columns, the padded input planes and the fused kernel's full-width columns. Kernel index
    /// arithmetic stays below these counts, so it cannot overflow either. Errors name `op`.
    pub fn check(&self, op: &'static str) -> crate::Result<()> {
        use crate::layout::{checked_add, checked_numel};
        let g = self;
        let padded = |size: usize, pad: usize| checked_add(op, "padded size", size, pad.saturating_mul(2));
        let (hp, wp) = (padded(g.in_h, g.pad_h)?, padded(g.in_w, g.pad_w)?);
        checked_numel(op, &[g.batch, g.channels, g.in_h, g.in_w])?;
        checked_numel(op, &[g.batch, g.channels, g.out_h, g.out_w])?;
        checked_numel(op, &[g.batch, g.channels, g.kernel_h, g.kernel_w, g.out_h, g.out_w])?;
        checked_numel(op, &[g.batch, g.channels, hp, wp])?;
        checked_numel(op, &[g.channels, g.kernel_h, g.kernel_w, g.out_h, wp])?;
        Ok(())
    }

    /// [`ConvGeom::check`] plus output extents that match the window sweep (kernels of strided
    /// windows rely on it; adaptive pooling, whose windows vary, uses `check` alone).
    pub fn check_window(&self, op: &'static str) -> crate::Result<()> {
        self.check(op)?;
        let g = self;
        let h = Self::out_extent(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h);
        let w = Self::out_extent(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
        if (h, w) != (Some(g.out_h), Some(g.out_w)) {
            return Err(crate::Error::shape(op, format!("{g:?}: the output extent does not match the window")));
        }
        Ok(())
    }

    /// Output extent of a window sweep, or `None` when the window does not fit or its span
    /// (`dilation·(kernel-1) + 1`) or the padded input (`input + 2·pad`) overflows.
    pub fn out_extent(input: usize, kernel: usize, stride: usize, pad: usize, dilation: usize) -> Option<usize> {
        let span = dilation.checked_mul(kernel.checked_sub(1)?)?.checked_add(1)?;
        let padded = pad.checked_mul(2)?.checked_add(input)?;
        if stride == 0 || span > padded {
            return None;
        }
        Some((padded - span) / stride + 1)
    }
}

/// A grouped 2-D convolution: input `[batch, channels, in_h, in_w]`, weight
/// `[out_channels, channels/groups, kernel_h, kernel_w]`, output `[batch, out_channels, out_h, out_w]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dArgs {
    /// The window sweep over the input (`channels` is the input's).
    pub geom: ConvGeom,
    /// Filters, one output channel each.
    pub out_channels: usize,
    /// Channel groups; both channel counts divide by it.
    pub groups: usize,
}

/// The gradients a conv2d backward is asked for (autograd wants none for data inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dWanted {
    /// The input's gradient.
    pub x: bool,
    /// The weight's gradient.
    pub weight: bool,
    /// The bias's gradient.
    pub bias: bool,
}

/// Gradients of a fused conv2d, each present when it was wanted.
#[derive(Debug)]
pub struct Conv2dGrads<S> {
    /// `[batch, channels, in_h, in_w]`.
    pub x: Option<S>,
    /// `[out_channels, channels/groups, kernel_h, kernel_w]`.
    pub weight: Option<S>,
    /// `[out_channels]`.
    pub bias: Option<S>,
}

/// `index_select` along one axis: the source viewed as `[outer, len, inner]`, output
/// `[outer, count, inner]` with `out[o, i, j] = src[o, indices[i], j]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexArgs {
    /// Product of the axes before the indexed one.
    pub outer: usize,
    /// Size of the indexed axis of the source.
    pub len: usize,
    /// Product of the axes after the indexed one.
    pub inner: usize,
    /// Number of indices.
    pub count: usize,
}

/// `gather` along one axis (PyTorch's `torch.gather`): source `[outer, len, inner]`, index and
/// output `[outer, count, inner]` with `out[o, i, j] = src[o, index[o, i, j], j]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherArgs {
    /// Product of the axes before the gathered one.
    pub outer: usize,
    /// Size of the gathered axis of the source; every index must be below it.
    pub len: usize,
    /// Product of the axes after the gathered one.
    pub inner: usize,
    /// Size of the gathered axis of the output (and of the index tensor).
    pub count: usize,
}

/// The distribution of a random fill (counter-based: the same seed gives the same values on
/// every device).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RandomKind {
    /// Uniform in `[0, 1)`.
    Uniform,
    /// Standard normal.
    Normal,
    /// Inverted dropout's keep-mask in one pass: `scale` where the uniform draw `u` (the
    /// [`Uniform`](Self::Uniform) value of the same seed and index) is above `p`, else 0 (a
    /// uniform draw compared, then multiplied by `scale`, in one kernel).
    KeepMask {
        /// The drop probability: `u > p` keeps.
        p: f32,
        /// What a kept element is, `1 / (1 - p)` for dropout.
        scale: f32,
    },
}

impl RandomKind {
    /// Refuses a draw longer than the stream's period: values are indexed by a u32 counter
    /// (a normal draw uses two words per value), so a longer tensor would silently repeat.
    pub fn check_len(self, len: usize) -> crate::Result<()> {
        let period: u64 = match self {
            RandomKind::Uniform | RandomKind::KeepMask { .. } => 1 << 32,
            RandomKind::Normal => 1 << 31,
        };
        if len as u64 > period {
            return Err(crate::Error::invalid(
                "random",
                format!("{len} values exceed the generator's period of {period} ({self:?}); draw in parts"),
            ));
        }
        Ok(())
    }
}

/// One optimizer update with its hyper-parameters; `state` buffers are listed per variant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimizerStep {
    /// state: `[velocity]` (ignored when momentum is 0).
    Sgd {
        /// Learning rate.
        lr: f32,
        /// Momentum factor μ (0: plain SGD).
        momentum: f32,
        /// Dampening of the gradient's share in the velocity.
        dampening: f32,
        /// L2 penalty added to the gradient.
        weight_decay: f32,
        /// Nesterov momentum.
        nesterov: bool,
        /// The velocity is uninitialised: it becomes the gradient.
        first_step: bool,
    },
    /// state: `[m, v]`. `decoupled` selects AdamW's weight decay.
    Adam {
        /// Learning rate.
        lr: f32,
        /// Decay of the first moment `m`.
        beta1: f32,
        /// Decay of the second moment `v`.
        beta2: f32,
        /// Added to `sqrt(v̂)` in the denominator.
        eps: f32,
        /// Weight decay factor (L2 or decoupled).
        weight_decay: f32,
        /// AdamW: decay the weights directly instead of adding to the gradient.
        decoupled: bool,
        /// 1-based step count, for the bias corrections.
        step: u32,
    },
    /// state: `[square_avg, momentum_buffer]`.
    RmsProp {
        /// Learning rate.
        lr: f32,
        /// Smoothing constant of the squared-gradient average.
        alpha: f32,
        /// Added to `sqrt(v)` in the denominator.
        eps: f32,
        /// L2 penalty added to the gradient.
        weight_decay: f32,
        /// Momentum factor of the update buffer (0: none).
        momentum: f32,
    },
}

/// One parameter's share of a fused optimizer update ([`Backend::optimizer_steps`](super::Backend::optimizer_steps)):
/// `step` applied to the first `len` elements of `param` (written in place), read from `grad`,
/// with `step`'s state buffers (written in place).
#[derive(Clone, Copy, Debug)]
pub struct OptimizerUpdate<'a> {
    /// The update and its hyper-parameters.
    pub step: OptimizerStep,
    /// The parameter, updated in place.
    pub param: &'a Storage,
    /// Its gradient, read only.
    pub grad: &'a Storage,
    /// The state buffers `step` lists, updated in place.
    pub state: &'a [&'a Storage],
    /// Elements of each.
    pub len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_extent_is_none_instead_of_wrapping() {
        assert_eq!(ConvGeom::out_extent(5, 3, 1, 1, 1), Some(5));
        assert_eq!(ConvGeom::out_extent(5, 3, 2, 0, 2), Some(1));
        assert_eq!(ConvGeom::out_extent(5, 3, 1, usize::MAX / 2 + 1, 1), None);
        assert_eq!(ConvGeom::out_extent(5, 3, 1, 0, usize::MAX), None);
        assert_eq!(ConvGeom::out_extent(5, usize::MAX, 1, 0, 2), None);
        assert_eq!(ConvGeom::out_extent(usize::MAX, 1, 1, 1, 1), None);
        assert_eq!(ConvGeom::out_extent(5, 0, 1, 0, 1), None);
        assert_eq!(ConvGeom::out_extent(5, 1, 0, 0, 1), None);
    }

    #[test]
    fn geometries_whose_buffers_overflow_fail_the_check() {
        let ok = ConvGeom::square(2, 3, (5, 5), 3, 1, 1, 1).unwrap();
        assert_eq!((ok.out_h, ok.out_w), (5, 5));
        assert!(ok.check("conv").is_ok());
        assert!(ConvGeom::square(1, 1, (4, 4), 1, 1, 1 << 21, 1).is_none(), "padded planes of 2^44");
        assert!(ConvGeom { batch: 1 << 30, channels: 1 << 30, ..ok }.check("conv").is_err());
        assert!(ConvGeom { pad_w: usize::MAX, ..ok }.check("conv").is_err());
        assert!(ConvGeom { out_h: usize::MAX, ..ok }.check("conv").is_err());
        assert!(ok.check_window("conv").is_ok());
        assert!(ConvGeom { out_h: 6, ..ok }.check_window("conv").is_err());
        assert!(ConvGeom { stride_w: 0, ..ok }.check_window("conv").is_err());
    }
}

/// The cell of a recurrent layer: which gates [`RecurrentArgs`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecurrentCell {
    /// PyTorch's LSTM: gates `i, f, g, o`; state `(h, c)`.
    Lstm,
    /// PyTorch's GRU: gates `r, z, n` with `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`.
    Gru,
}

impl RecurrentCell {
    /// Gates per hidden unit: 4 (LSTM) or 3 (GRU).
    pub fn gates(self) -> usize {
        match self {
            RecurrentCell::Lstm => 4,
            RecurrentCell::Gru => 3,
        }
    }

    /// Values per hidden unit and step the forward saves for the backward: `i, f, g, o, c`
    /// (LSTM) or `r, z, n, W_hn h + b_hn` (GRU).
    pub fn saved(self) -> usize {
        match self {
            RecurrentCell::Lstm => 5,
            RecurrentCell::Gru => 4,
        }
    }

    /// Rows of `hidden` after the `steps` outputs in the packed result: `h_n` and `c_n` (LSTM)
    /// or `h_n` (GRU).
    pub fn states(self) -> usize {
        match self {
            RecurrentCell::Lstm => 2,
            RecurrentCell::Gru => 1,
        }
    }
}

/// One direction of one recurrent layer over a whole sequence: `batch` sequences of `steps`
/// steps, `hidden` units, walked from the last step to the first when `reverse`.
///
/// Layouts (row-major): the input projection `xproj [batch, steps, G·hidden]` (G = gates, in
/// PyTorch's order), the transposed recurrent weight `w_hh_t [hidden, G·hidden]` for the forward
/// and `w_hh [G·hidden, hidden]` for the backward, `b_hh [G·hidden]`, the initial states
/// `h0`, `c0` `[batch, hidden]`, the packed result `[batch, steps + states, hidden]` (the output
/// at every time step in time order, then `h_n`, then `c_n` for the LSTM) and the saved values
/// `[batch, steps, saved·hidden]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentArgs {
    /// LSTM or GRU.
    pub cell: RecurrentCell,
    /// Sequences.
    pub batch: usize,
    /// Time steps per sequence.
    pub steps: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Walk the steps from the last to the first (a bidirectional layer's backward direction).
    pub reverse: bool,
}

impl RecurrentArgs {
    /// `G·hidden`: the width of a projection row.
    pub fn width(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// `Ok` when no axis is empty and every operand's element count fits a `usize`.
    pub fn check(&self, op: &'static str) -> crate::Result<()> {
        if self.batch == 0 || self.steps == 0 || self.hidden == 0 {
            return Err(crate::Error::shape(
                op,
                format!(
                    "batch {}, steps {}, hidden {}: every size must be positive",
                    self.batch, self.steps, self.hidden
                ),
            ));
        }
        let steps_out = self
            .steps
            .checked_add(self.cell.states())
            .ok_or_else(|| crate::Error::shape(op, format!("{} steps overflow", self.steps)))?;
        crate::layout::checked_numel(op, &[self.batch, steps_out, self.hidden])?;
        crate::layout::checked_numel(op, &[self.batch, self.steps, self.cell.saved(), self.hidden])?;
        crate::layout::checked_numel(op, &[self.cell.gates(), self.hidden, self.hidden])?;
        Ok(())
    }

    /// Elements of the packed result: `batch · (steps + states) · hidden`.
    pub fn packed_len(&self) -> usize {
        self.batch * (self.steps + self.cell.states()) * self.hidden
    }

    /// Elements of the saved values: `batch · steps · saved · hidden`.
    pub fn saved_len(&self) -> usize {
        self.batch * self.steps * self.cell.saved() * self.hidden
    }

    /// Elements of a projection (or its gradient): `batch · steps · G · hidden`.
    pub fn projection_len(&self) -> usize {
        self.batch * self.steps * self.width()
    }

    /// The time index of processing step `s`.
    pub fn time(&self, s: usize) -> usize {
        if self.reverse {
            self.steps - 1 - s
        } else {
            s
        }
    }
}
