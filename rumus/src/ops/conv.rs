//! 2-D convolution over NCHW input: one graph node either way. Backends with a fused kernel (wgpu;
//! the CPU, for stride 1) convolve in one op with a backward of their own; elsewhere it is im2col
//! followed by one batched matmul.
//!
//! The composed node saves its input, not the im2col columns (kh·kw times larger): the backward
//! pass rebuilds the columns for `dW = Σ_batch grad @ colsᵀ`, and folds `dcols = Wᵀ @ grad` back
//! into `dX` with `col2im`. `im2col` is also a differentiable op of its own (its backward is
//! `col2im`).

use crate::autograd::{BackwardOp, NoGradGuard};
use crate::backend::{Conv2dArgs, Conv2dWanted, ConvGeom, Storage};
use crate::layout::checked_numel;
use crate::tensor::RawTensor;
use crate::{Error, Result};

/// Hyper-parameters of a 2-D sliding window, `(height, width)` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl Window {
    /// The geometry of this window over `x` (`[n, c, h, w]`), or a shape error naming `op`.
    pub(crate) fn geometry(&self, op: &'static str, x: &RawTensor) -> Result<ConvGeom> {
        if x.rank() != 4 {
            return Err(Error::shape(
                op,
                format!("input {:?}: expected rank 4 [batch, channels, height, width]", x.shape()),
            ));
        }
        let (kh, kw) = self.kernel;
        let (sh, sw) = self.stride;
        let (dh, dw) = self.dilation;
        if kh == 0 || kw == 0 || sh == 0 || sw == 0 || dh == 0 || dw == 0 {
            return Err(Error::invalid(
                op,
                format!(
                    "kernel {:?}, stride {:?} and dilation {:?} must all be positive",
                    self.kernel, self.stride, self.dilation
                ),
            ));
        }
        let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
        let (ph, pw) = self.padding;
        let out_h = ConvGeom::out_extent(h, kh, sh, ph, dh);
        let out_w = ConvGeom::out_extent(w, kw, sw, pw, dw);
        let (Some(out_h), Some(out_w)) = (out_h, out_w) else {
            return Err(Error::shape(
                op,
                format!(
                    "input {:?}: kernel {:?} with dilation {:?} does not fit the input padded by {:?} \
                     (or the padded size or the window span overflows)",
                    x.shape(),
                    self.kernel,
                    self.dilation,
                    self.padding
                ),
            ));
        };
        check_geometry(
            op,
            ConvGeom {
                batch: n,
                channels: c,
                in_h: h,
                in_w: w,
                kernel_h: kh,
                kernel_w: kw,
                stride_h: sh,
                stride_w: sw,
                pad_h: ph,
                pad_w: pw,
                dilation_h: dh,
                dilation_w: dw,
                out_h,
                out_w,
            },
        )
    }
}

/// `geom` if it passes [`ConvGeom::check`], else its error naming `op`.
pub(crate) fn check_geometry(op: &'static str, geom: ConvGeom) -> Result<ConvGeom> {
    geom.check(op)?;
    Ok(geom)
}

struct Im2colBackward {
    geom: ConvGeom,
}

impl BackwardOp for Im2colBackward {
    fn name(&self) -> &'static str {
        "im2col"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let storage = grad.device().backend().col2im(grad.storage(), &self.geom)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, inputs[0].shape(), grad.device()))])
    }
}

/// A backend's fused convolution (see [`Backend::conv2d`](crate::backend::Backend::conv2d)).
struct FusedConv2dBackward {
    args: Conv2dArgs,
}

impl BackwardOp for FusedConv2dBackward {
    fn name(&self) -> &'static str {
        "conv2d"
    }
    /// Inputs: `x`, `weight` and, when there is one, `bias`.
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, w, bias) = (&inputs[0], &inputs[1], inputs.get(2));
        let grad = grad.contiguous()?;
        // Only the gradients autograd will keep: a first layer's input is data.
        let wanted = Conv2dWanted {
            x: x.requires_grad(),
            weight: w.requires_grad(),
            bias: bias.is_some_and(RawTensor::requires_grad),
        };
        let grads =
            grad.device().backend().conv2d_backward(x.storage(), w.storage(), grad.storage(), &self.args, wanted)?;
        let wrap =
            |s: Option<Storage>, like: &RawTensor| s.map(|s| RawTensor::from_kernel(s, like.shape(), grad.device()));
        let mut out = vec![wrap(grads.x, x), wrap(grads.weight, w)];
        if let Some(bias) = bias {
            out.push(wrap(grads.bias, bias));
        }
        Ok(out)
    }
}

/// The composed convolution. Inputs: the contiguous input, the weight and, when there is one,
/// the bias.
struct Conv2dBackward {
    geom: ConvGeom,
    groups: usize,
}

impl BackwardOp for Conv2dBackward {
    fn name(&self) -> &'static str {
        "conv2d"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let (x, weight, bias) = (&inputs[0], &inputs[1], inputs.get(2));
        let geom = &self.geom;
        let (n, groups, spatial) = (geom.batch, self.groups, geom.out_h * geom.out_w);
        let out_channels = weight.shape()[0];
        let per_group = weight.shape()[1] * geom.kernel_h * geom.kernel_w;
        // The grouped product of the forward pass, [n, g, o/g, oh·ow] = [g, o/g, c/g·kh·kw] @
        // [n, g, c/g·kh·kw, oh·ow]; with one group the extra axis has size 1 and costs nothing.
        let grad_groups = grad.reshape(&[n, groups, out_channels / groups, spatial])?;
        let w = weight.reshape(&[groups, out_channels / groups, per_group])?;
        let gw = weight
            .requires_grad()
            .then(|| {
                let cols = x.im2col_geom(*geom)?.reshape(&[n, groups, per_group, spatial])?;
                grad_groups.matmul(&cols.transpose(-1, -2)?)?.sum_to_shape(w.shape())?.reshape(weight.shape())
            })
            .transpose()?;
        let gx = x
            .requires_grad()
            .then(|| {
                let dcols = w.transpose(-1, -2)?.matmul(&grad_groups)?;
                let storage = x.device().backend().col2im(dcols.storage(), geom)?;
                Ok::<_, Error>(RawTensor::from_kernel(storage, x.shape(), x.device()))
            })
            .transpose()?;
        let gb = bias.filter(|b| b.requires_grad()).map(|_| grad.sum(&[0, 2, 3], false)).transpose()?;
        Ok(vec![gx, gw, gb])
    }
}

impl RawTensor {
    /// Unfolds sliding windows of an NCHW tensor into columns `[n, c·kh·kw, oh·ow]` (PyTorch's
    /// `unfold`). Rows are ordered channel-major, then kernel row, then kernel column.
    pub fn im2col(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Result<RawTensor> {
        self.check_f32("im2col")?;
        let geom = Window { kernel, stride, padding, dilation }.geometry("im2col", self)?;
        self.im2col_geom(geom)
    }

    pub(crate) fn im2col_geom(&self, geom: ConvGeom) -> Result<RawTensor> {
        let x = self.contiguous()?;
        let storage = x.device().backend().im2col(x.storage(), &geom)?;
        let shape = [geom.batch, geom.channels * geom.kernel_h * geom.kernel_w, geom.out_h * geom.out_w];
        Ok(RawTensor::from_op_contiguous(storage, &shape, x.device(), &[&x], || Box::new(Im2colBackward { geom })))
    }

    /// 2-D convolution (cross-correlation, like PyTorch) of `self` `[n, c, h, w]` with `weight`
    /// `[o, c/groups, kh, kw]` and an optional `bias` `[o]`; returns `[n, o, oh, ow]`.
    pub fn conv2d(
        &self,
        weight: &RawTensor,
        bias: Option<&RawTensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Result<RawTensor> {
        const OP: &str = "conv2d";
        self.check_f32(OP)?;
        weight.check_f32(OP)?;
        self.check_same_device(OP, weight)?;
        let describe = || format!("input {:?} weight {:?}", self.shape(), weight.shape());
        if self.rank() != 4 || weight.rank() != 4 {
            return Err(Error::shape(
                OP,
                format!(
                    "{}: expected input [batch, channels, height, width] and weight [out, in/groups, kh, kw]",
                    describe()
                ),
            ));
        }
        if groups == 0 {
            return Err(Error::invalid(OP, "groups must be at least 1"));
        }
        let channels = self.shape()[1];
        let (out_channels, group_channels, kh, kw) =
            (weight.shape()[0], weight.shape()[1], weight.shape()[2], weight.shape()[3]);
        if !channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
            return Err(Error::shape(
                OP,
                format!(
                    "{}: input channels {channels} and output channels {out_channels} must both be divisible by groups {groups}",
                    describe()
                ),
            ));
        }
        if channels / groups != group_channels {
            return Err(Error::shape(
                OP,
                format!(
                    "{}: input has {channels} channels but weight expects {} (groups {groups})",
                    describe(),
                    group_channels * groups
                ),
            ));
        }
        if let Some(b) = bias {
            b.check_f32(OP)?;
            self.check_same_device(OP, b)?;
            if b.shape() != [out_channels] {
                return Err(Error::shape(OP, format!("{}: bias {:?} must be [{out_channels}]", describe(), b.shape())));
            }
        }
        let geom = Window { kernel: (kh, kw), stride, padding, dilation }.geometry(OP, self)?;
        checked_numel(OP, &[geom.batch, out_channels, geom.out_h, geom.out_w])?;
        let (n, spatial, taps) = (geom.batch, geom.out_h * geom.out_w, kh * kw);
        let (x, weight) = (self.contiguous()?, weight.contiguous()?);
        let bias = bias.map(RawTensor::contiguous).transpose()?;
        let inputs: Vec<&RawTensor> = [&x, &weight].into_iter().chain(bias.as_ref()).collect();
        let shape = [n, out_channels, geom.out_h, geom.out_w];
        let args = Conv2dArgs { geom, out_channels, groups };
        let fused =
            x.device().backend().conv2d(x.storage(), weight.storage(), bias.as_ref().map(|b| b.storage()), &args)?;
        if let Some(storage) = fused {
            return Ok(RawTensor::from_op_contiguous(storage, &shape, x.device(), &inputs, || {
                Box::new(FusedConv2dBackward { args })
            }));
        }
        // The ops below record no graph: Conv2dBackward differentiates the whole convolution, so
        // the columns are freed when the forward pass is done with them.
        let guard = NoGradGuard::new();
        let cols = x.im2col_geom(geom)?;
        let out = if groups == 1 {
            // [o, c·kh·kw] broadcast against [n, c·kh·kw, oh·ow]: one batched matmul.
            let w = weight.reshape(&[out_channels, channels * taps])?;
            w.matmul(&cols)?
        } else {
            // Rows of `cols` are channel-major, so group g owns a contiguous block of rows:
            // [n, g, c/g·kh·kw, oh·ow] against [g, o/g, c/g·kh·kw], still one batched matmul.
            let per_group = group_channels * taps;
            let cols = cols.reshape(&[n, groups, per_group, spatial])?;
            let w = weight.reshape(&[groups, out_channels / groups, per_group])?;
            w.matmul(&cols)?.reshape(&[n, out_channels, spatial])?
        };
        let out = match &bias {
            Some(b) => out.add(&b.reshape(&[out_channels, 1])?)?,
            None => out,
        };
        drop(guard);
        Ok(RawTensor::from_op_contiguous(out.storage().clone(), &shape, x.device(), &inputs, || {
            Box::new(Conv2dBackward { geom, groups })
        }))
    }
}
