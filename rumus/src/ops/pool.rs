//! 2-D pooling over NCHW input: max, average (padding counted, PyTorch's default) and adaptive
//! average. Each forward calls one kernel; each backward calls its adjoint kernel.

use super::conv::Window;
use crate::autograd::BackwardOp;
use crate::backend::{ConvGeom, Storage};
use crate::tensor::RawTensor;
use crate::{Error, Result};

struct MaxPoolBackward {
    /// Flat per-plane input index of each output's maximum.
    argmax: Storage,
    geom: ConvGeom,
}

impl BackwardOp for MaxPoolBackward {
    fn name(&self) -> &'static str {
        "max_pool2d"
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let storage = grad.device().backend().max_pool2d_backward(grad.storage(), &self.argmax, &self.geom)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, inputs[0].shape(), grad.device()))])
    }
}

struct AvgPoolBackward {
    geom: ConvGeom,
    adaptive: bool,
}

impl BackwardOp for AvgPoolBackward {
    fn name(&self) -> &'static str {
        if self.adaptive {
            "adaptive_avg_pool2d"
        } else {
            "avg_pool2d"
        }
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let backend = grad.device().backend();
        let storage = if self.adaptive {
            backend.adaptive_avg_pool2d_backward(grad.storage(), &self.geom)?
        } else {
            backend.avg_pool2d_backward(grad.storage(), &self.geom)?
        };
        Ok(vec![Some(RawTensor::from_kernel(storage, inputs[0].shape(), grad.device()))])
    }
}

/// PyTorch rejects padding over half the kernel: such a window could see only padding.
fn check_padding(op: &'static str, window: &Window) -> Result<()> {
    let (kh, kw) = window.kernel;
    let (ph, pw) = window.padding;
    if ph > kh / 2 || pw > kw / 2 {
        return Err(Error::invalid(
            op,
            format!("padding {:?} must be at most half the kernel {:?}", window.padding, window.kernel),
        ));
    }
    Ok(())
}

fn pooled_shape(geom: &ConvGeom) -> [usize; 4] {
    [geom.batch, geom.channels, geom.out_h, geom.out_w]
}

impl RawTensor {
    /// Max pooling of `[n, c, h, w]`; padded positions never win.
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Result<RawTensor> {
        const OP: &str = "max_pool2d";
        self.check_f32(OP)?;
        let window = Window { kernel, stride, padding, dilation };
        let geom = window.geometry(OP, self)?;
        check_padding(OP, &window)?;
        // The argmax of each window is a u32 index into its input plane.
        if geom.in_h.saturating_mul(geom.in_w) > u32::MAX as usize {
            return Err(Error::shape(OP, format!("input {:?}: planes over 2^32 elements", self.shape())));
        }
        let x = self.contiguous()?;
        let (values, argmax) = x.device().backend().max_pool2d(x.storage(), &geom)?;
        Ok(RawTensor::from_op_contiguous(values, &pooled_shape(&geom), x.device(), &[&x], || {
            Box::new(MaxPoolBackward { argmax, geom })
        }))
    }

    /// Average pooling of `[n, c, h, w]`; padding counts as zeros in the divisor
    /// (`count_include_pad=True`, PyTorch's default).
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Result<RawTensor> {
        const OP: &str = "avg_pool2d";
        self.check_f32(OP)?;
        let window = Window { kernel, stride, padding, dilation: (1, 1) };
        let geom = window.geometry(OP, self)?;
        check_padding(OP, &window)?;
        let x = self.contiguous()?;
        let storage = x.device().backend().avg_pool2d(x.storage(), &geom)?;
        Ok(RawTensor::from_op_contiguous(storage, &pooled_shape(&geom), x.device(), &[&x], || {
            Box::new(AvgPoolBackward { geom, adaptive: false })
        }))
    }

    /// Average pooling of `[n, c, h, w]` to a fixed `[n, c, oh, ow]`, with PyTorch's windows
    /// `[floor(i·h/oh), ceil((i+1)·h/oh))`.
    pub fn adaptive_avg_pool2d(&self, output: (usize, usize)) -> Result<RawTensor> {
        const OP: &str = "adaptive_avg_pool2d";
        self.check_f32(OP)?;
        if self.rank() != 4 {
            return Err(Error::shape(
                OP,
                format!("input {:?}: expected rank 4 [batch, channels, height, width]", self.shape()),
            ));
        }
        let (n, c, h, w) = (self.shape()[0], self.shape()[1], self.shape()[2], self.shape()[3]);
        let (out_h, out_w) = output;
        if out_h == 0 || out_w == 0 || h == 0 || w == 0 {
            return Err(Error::shape(
                OP,
                format!("input {:?} output {output:?}: all spatial sizes must be positive", self.shape()),
            ));
        }
        // Window bounds are computed as `i·h / oh` for i up to oh.
        if out_h.checked_mul(h).is_none() || out_w.checked_mul(w).is_none() {
            return Err(Error::shape(
                OP,
                format!("input {:?} output {output:?}: window bounds overflow", self.shape()),
            ));
        }
        // Kernel fields hold the largest window (informational: the kernels compute each window).
        let geom = ConvGeom {
            batch: n,
            channels: c,
            in_h: h,
            in_w: w,
            kernel_h: h.div_ceil(out_h) + 1,
            kernel_w: w.div_ceil(out_w) + 1,
            stride_h: 1,
            stride_w: 1,
            pad_h: 0,
            pad_w: 0,
            dilation_h: 1,
            dilation_w: 1,
            out_h,
            out_w,
        };
        let geom = super::conv::check_geometry(OP, geom)?;
        let x = self.contiguous()?;
        let storage = x.device().backend().adaptive_avg_pool2d(x.storage(), &geom)?;
        Ok(RawTensor::from_op_contiguous(storage, &pooled_shape(&geom), x.device(), &[&x], || {
            Box::new(AvgPoolBackward { geom, adaptive: true })
        }))
    }
}

/// `Ok` when `x` is `[batch, channels, length]`, else a shape error naming `op`.
fn check_rank3(op: &'static str, x: &RawTensor) -> Result<()> {
    if x.rank() != 3 {
        return Err(Error::shape(op, format!("input {:?}: expected rank 3 [batch, channels, length]", x.shape())));
    }
    Ok(())
}

/// `Ok` when `x` is `[batch, channels, height, width]` with a non-empty plane, else a shape
/// error naming `op`.
fn check_image(op: &'static str, x: &RawTensor) -> Result<()> {
    if x.rank() != 4 || x.shape()[2] == 0 || x.shape()[3] == 0 {
        return Err(Error::shape(
            op,
            format!("input {:?}: expected rank 4 [batch, channels, height, width] with a non-empty plane", x.shape()),
        ));
    }
    Ok(())
}

impl RawTensor {
    /// Max pooling of `[n, c, l]`: the 2-D kernel over `[n, c, 1, l]` (a view, no copy).
    pub fn max_pool1d(&self, kernel: usize, stride: usize, padding: usize, dilation: usize) -> Result<RawTensor> {
        check_rank3("max_pool1d", self)?;
        self.unsqueeze(2)?.max_pool2d((1, kernel), (1, stride), (0, padding), (1, dilation))?.squeeze(2)
    }

    /// Average pooling of `[n, c, l]` (padding counted in the divisor, PyTorch's default).
    pub fn avg_pool1d(&self, kernel: usize, stride: usize, padding: usize) -> Result<RawTensor> {
        check_rank3("avg_pool1d", self)?;
        self.unsqueeze(2)?.avg_pool2d((1, kernel), (1, stride), (0, padding))?.squeeze(2)
    }

    /// The mean of each plane: `[n, c, h, w]` → `[n, c]` (PyTorch's `AdaptiveAvgPool2d(1)`
    /// then flatten; Keras's `GlobalAveragePooling2D`).
    pub fn global_avg_pool2d(&self) -> Result<RawTensor> {
        check_image("global_avg_pool2d", self)?;
        self.mean(&[2, 3], false)
    }

    /// The maximum of each plane: `[n, c, h, w]` → `[n, c]`. One max-pooling window over the
    /// whole plane, so a tie sends the gradient to its first maximum, like PyTorch's
    /// `AdaptiveMaxPool2d(1)`.
    pub fn global_max_pool2d(&self) -> Result<RawTensor> {
        check_image("global_max_pool2d", self)?;
        let (n, c, h, w) = (self.shape()[0], self.shape()[1], self.shape()[2], self.shape()[3]);
        self.max_pool2d((h, w), (h, w), (0, 0), (1, 1))?.reshape(&[n, c])
    }
}
