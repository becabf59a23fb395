//! Transposed 2-D convolution (PyTorch's `conv_transpose2d`), written with the convolution's
//! own machinery and no kernel of its own.
//!
//! A transposed convolution is the input-gradient of a convolution: the convolution that maps
//! `[n, out, H', W']` to `[n, in, h, w]` with the weight `[in, out/groups, kh, kw]`. So the
//! forward pass is that convolution's backward-data path: one grouped matmul
//! `cols = Wᵀ @ x` (`[n, out·kh·kw, h·w]`) folded into the output with `col2im`. Its backward
//! pass is the convolution itself: `dX = conv2d(dY, W)` (the backend's fused kernel where there
//! is one), `dW = Σ_batch x @ im2col(dY)ᵀ`, `db = Σ dY`.

use crate::autograd::{BackwardOp, NoGradGuard};
use crate::backend::ConvGeom;
use crate::layout::checked_numel;
use crate::tensor::RawTensor;
use crate::{Error, Result};

use super::conv::check_geometry;

/// Hyper-parameters of a transposed convolution, each pair `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dArgs {
    /// Step between the input positions' windows in the output `(sh, sw)`, at least 1.
    pub stride: (usize, usize),
    /// Rows/columns removed from each side of the full output `(ph, pw)`.
    pub padding: (usize, usize),
    /// Extra rows/columns on the bottom/right of the output; smaller than the stride.
    pub output_padding: (usize, usize),
    /// Spacing between the window's taps `(dh, dw)`; 1 is a dense window.
    pub dilation: (usize, usize),
    /// Channel groups: each output channel sees `in_channels / groups` inputs; both channel counts must divide by it.
    pub groups: usize,
}

impl Default for ConvTranspose2dArgs {
    /// PyTorch's defaults: stride 1, no padding, no output padding, dilation 1, one group.
    fn default() -> Self {
        ConvTranspose2dArgs { stride: (1, 1), padding: (0, 0), output_padding: (0, 0), dilation: (1, 1), groups: 1 }
    }
}

/// The output extent of a transposed convolution along one axis,
/// `(h − 1)·s − 2p + d·(k − 1) + output_padding + 1`, or `None` when it is not positive or
/// overflows.
pub fn conv_transpose_extent(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    output_padding: usize,
    dilation: usize,
) -> Option<usize> {
    let grown = input
        .checked_sub(1)?
        .checked_mul(stride)?
        .checked_add(dilation.checked_mul(kernel.checked_sub(1)?)?)?
        .checked_add(output_padding)?
        .checked_add(1)?;
    grown.checked_sub(padding.checked_mul(2)?).filter(|&v| v > 0)
}

/// Inputs: the contiguous input, the weight and, when there is one, the bias. `geom` is the
/// geometry of the adjoint convolution (input `[n, out, H', W']`, output `[n, in, h, w]`).
struct ConvTranspose2dBackward {
    geom: ConvGeom,
    args: ConvTranspose2dArgs,
}

impl BackwardOp for ConvTranspose2dBackward {
    fn name(&self) -> &'static str {
        "conv_transpose2d"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, weight, bias) = (&inputs[0], &inputs[1], inputs.get(2));
        let (geom, a) = (&self.geom, &self.args);
        let grad = grad.contiguous()?;
        let gx = x
            .requires_grad()
            .then(|| grad.conv2d(weight, None, a.stride, a.padding, a.dilation, a.groups))
            .transpose()?;
        let gw = weight
            .requires_grad()
            .then(|| {
                let (n, g, spatial) = (geom.batch, a.groups, geom.out_h * geom.out_w);
                let in_channels = weight.shape()[0];
                let per_group = weight.shape()[1] * geom.kernel_h * geom.kernel_w;
                let cols = grad.im2col_geom(*geom)?.reshape(&[n, g, per_group, spatial])?;
                let xg = x.reshape(&[n, g, in_channels / g, spatial])?;
                xg.matmul(&cols.transpose(-1, -2)?)?
                    .sum_to_shape(&[g, in_channels / g, per_group])?
                    .reshape(weight.shape())
            })
            .transpose()?;
        let gb = bias.filter(|b| b.requires_grad()).map(|_| grad.sum(&[0, 2, 3], false)).transpose()?;
        Ok(vec![gx, gw, gb])
    }
}

impl RawTensor {
    /// Transposed 2-D convolution (PyTorch's `conv_transpose2d`) of `self` `[n, in, h, w]` with
    /// `weight` `[in, out/groups, kh, kw]` and an optional `bias` `[out]`; returns
    /// `[n, out, H', W']` with `H' = (h − 1)·s − 2p + d·(kh − 1) + output_padding + 1`.
    ///
    /// `output_padding` must be smaller than the stride along its axis (PyTorch also accepts
    /// one smaller than the dilation; that case is refused here).
    pub fn conv_transpose2d(
        &self,
        weight: &RawTensor,
        bias: Option<&RawTensor>,
        args: ConvTranspose2dArgs,
    ) -> Result<RawTensor> {
        const OP: &str = "conv_transpose2d";
        self.check_f32(OP)?;
        weight.check_f32(OP)?;
        self.check_same_device(OP, weight)?;
        let describe = || format!("input {:?} weight {:?}", self.shape(), weight.shape());
        if self.rank() != 4 || weight.rank() != 4 {
            return Err(Error::shape(
                OP,
                format!(
                    "{}: expected input [batch, in, height, width] and weight [in, out/groups, kh, kw]",
                    describe()
                ),
            ));
        }
        let ConvTranspose2dArgs { stride, padding, output_padding, dilation, groups } = args;
        if groups == 0 {
            return Err(Error::invalid(OP, "groups must be at least 1"));
        }
        let (n, in_channels, h, w) = (self.shape()[0], self.shape()[1], self.shape()[2], self.shape()[3]);
        let (w_in, group_out, kh, kw) = (weight.shape()[0], weight.shape()[1], weight.shape()[2], weight.shape()[3]);
        if w_in != in_channels {
            return Err(Error::shape(
                OP,
                format!("{}: input has {in_channels} channels but the weight's first axis is {w_in}", describe()),
            ));
        }
        if !in_channels.is_multiple_of(groups) {
            return Err(Error::shape(
                OP,
                format!("{}: input channels {in_channels} must be divisible by groups {groups}", describe()),
            ));
        }
        if [kh, kw, group_out, stride.0, stride.1, dilation.0, dilation.1].contains(&0) {
            return Err(Error::invalid(
                OP,
                format!(
                    "{}: kernel, output channels, stride {stride:?} and dilation {dilation:?} must all be positive",
                    describe()
                ),
            ));
        }
        if output_padding.0 >= stride.0 || output_padding.1 >= stride.1 {
            return Err(Error::invalid(
                OP,
                format!("output_padding {output_padding:?} must be smaller than the stride {stride:?} on each axis"),
            ));
        }
        let Some(out_channels) = group_out.checked_mul(groups) else {
            return Err(Error::shape(OP, format!("{}: output channels overflow", describe())));
        };
        if let Some(b) = bias {
            b.check_f32(OP)?;
            self.check_same_device(OP, b)?;
            if b.shape() != [out_channels] {
                return Err(Error::shape(OP, format!("{}: bias {:?} must be [{out_channels}]", describe(), b.shape())));
            }
        }
        let out_h = conv_transpose_extent(h, kh, stride.0, padding.0, output_padding.0, dilation.0);
        let out_w = conv_transpose_extent(w, kw, stride.1, padding.1, output_padding.1, dilation.1);
        let (Some(out_h), Some(out_w)) = (out_h, out_w) else {
            return Err(Error::shape(
                OP,
                format!(
                    "{}: padding {padding:?} leaves no output (or the size overflows): \
                     (h - 1)·stride - 2·padding + dilation·(k - 1) + output_padding + 1 must be positive",
                    describe()
                ),
            ));
        };
        let shape = [n, out_channels, out_h, out_w];
        checked_numel(OP, &shape)?;
        // The adjoint convolution: [n, out, H', W'] → [n, in, h, w]. With output_padding below
        // the stride its window sweep over H' gives back exactly h.
        let geom = check_geometry(
            OP,
            ConvGeom {
                batch: n,
                channels: out_channels,
                in_h: out_h,
                in_w: out_w,
                kernel_h: kh,
                kernel_w: kw,
                stride_h: stride.0,
                stride_w: stride.1,
                pad_h: padding.0,
                pad_w: padding.1,
                dilation_h: dilation.0,
                dilation_w: dilation.1,
                out_h: h,
                out_w: w,
            },
        )?;
        geom.check_window(OP)?;
        let (x, weight) = (self.contiguous()?, weight.contiguous()?);
        let bias = bias.map(RawTensor::contiguous).transpose()?;
        let inputs: Vec<&RawTensor> = [&x, &weight].into_iter().chain(bias.as_ref()).collect();
        // Recorded as one node: the backward rule below differentiates the whole op.
        let guard = NoGradGuard::new();
        let per_group = group_out * kh * kw;
        let spatial = h * w;
        // [g, out/g·kh·kw, in/g] @ [n, g, in/g, h·w] = [n, g, out/g·kh·kw, h·w]; groups own
        // contiguous row blocks of col2im's channel-major columns.
        let wt = weight.reshape(&[groups, in_channels / groups, per_group])?.transpose(-1, -2)?;
        let cols = wt.matmul(&x.reshape(&[n, groups, in_channels / groups, spatial])?)?.contiguous()?;
        let folded = x.device().backend().col2im(cols.storage(), &geom)?;
        let out = RawTensor::from_kernel(folded, &shape, x.device());
        let out = match &bias {
            Some(b) => out.add(&b.reshape(&[out_channels, 1, 1])?)?.contiguous()?,
            None => out,
        };
        drop(guard);
        Ok(RawTensor::from_op_contiguous(out.storage().clone(), &shape, x.device(), &inputs, || {
            Box::new(ConvTranspose2dBackward { geom, args })
        }))
    }
}
