//! Softmax and log-softmax over any axis. The kernels work on rows of the last axis; other axes
//! are moved last with a permute (a view) and moved back afterwards.

use crate::autograd::BackwardOp;
use crate::layout::resolve_axis;
use crate::tensor::RawTensor;
use crate::Result;

struct SoftmaxBackward {
    output: RawTensor,
    log: bool,
}

impl BackwardOp for SoftmaxBackward {
    fn name(&self) -> &'static str {
        if self.log {
            "log_softmax"
        } else {
            "softmax"
        }
    }
    fn backward(&self, _: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let grad = grad.contiguous()?;
        let cols = *grad.shape().last().unwrap_or(&1);
        let rows = grad.numel() / cols.max(1);
        let backend = grad.device().backend();
        let storage = backend.softmax_backward(self.output.storage(), grad.storage(), rows, cols, self.log)?;
        Ok(vec![Some(RawTensor::from_kernel(storage, grad.shape(), grad.device()))])
    }
}

impl RawTensor {
    fn softmax_last(&self, log: bool) -> Result<RawTensor> {
        self.check_f32("softmax")?;
        let x = self.contiguous()?;
        let cols = *x.shape().last().unwrap_or(&1);
        let rows = x.numel() / cols.max(1);
        let storage = x.device().backend().softmax(x.storage(), rows, cols, log)?;
        let output = RawTensor::from_kernel(storage.clone(), x.shape(), x.device());
        Ok(RawTensor::from_op_contiguous(storage, x.shape(), x.device(), &[&x], || {
            Box::new(SoftmaxBackward { output, log })
        }))
    }

    fn softmax_axis(&self, axis: isize, log: bool) -> Result<RawTensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        // A rank-0 tensor has no axis to normalise over: every axis is out of range.
        let axis = resolve_axis(op, axis, self.rank())?;
        let last = self.rank() - 1;
        if axis == last {
            return self.softmax_last(log);
        }
        self.transpose(axis as isize, last as isize)?.softmax_last(log)?.transpose(axis as isize, last as isize)
    }

    /// `exp(x) / sum(exp(x))` along `axis`, stable for large values.
    pub fn softmax(&self, axis: isize) -> Result<RawTensor> {
        self.softmax_axis(axis, false)
    }

    /// `x - log(sum(exp(x)))` along `axis`.
    pub fn log_softmax(&self, axis: isize) -> Result<RawTensor> {
        self.softmax_axis(axis, true)
    }
}
