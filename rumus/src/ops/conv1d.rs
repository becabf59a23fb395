//! 1-D convolution over `[n, c, l]`: the 2-D convolution of `[n, c, 1, l]` (a view, no copy)
//! with a `[o, c/groups, 1, k]` kernel, so it runs on the same kernels (fused where the backend
//! has one) and differentiates through them.

use crate::tensor::RawTensor;
use crate::{Error, Result};

/// Padding of a 1-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv1dPadding {
    /// The same number of zeros on both sides (PyTorch's `padding=p`; `valid` is `Explicit(0)`).
    Explicit(usize),
    /// PyTorch's `padding='same'` (stride 1 only): `d·(k − 1)` zeros in all, the odd one on the
    /// right, so the output is as long as the input.
    Same,
}

impl RawTensor {
    /// 1-D convolution (cross-correlation, like PyTorch) of `self` `[n, c, l]` with `weight`
    /// `[o, c/groups, k]` and an optional `bias` `[o]`; returns `[n, o, l']` with
    /// `l' = floor((l + 2p − d·(k − 1) − 1)/s) + 1`.
    pub fn conv1d(
        &self,
        weight: &RawTensor,
        bias: Option<&RawTensor>,
        stride: usize,
        padding: Conv1dPadding,
        dilation: usize,
        groups: usize,
    ) -> Result<RawTensor> {
        const OP: &str = "conv1d";
        if self.rank() != 3 || weight.rank() != 3 {
            return Err(Error::shape(
                OP,
                format!(
                    "input {:?} weight {:?}: expected input [batch, channels, length] and weight [out, in/groups, k]",
                    self.shape(),
                    weight.shape()
                ),
            ));
        }
        let (x, w) = (self.unsqueeze(2)?, weight.unsqueeze(2)?);
        let out = match padding {
            Conv1dPadding::Explicit(p) => x.conv2d(&w, bias, (1, stride), (0, p), (1, dilation), groups)?,
            Conv1dPadding::Same => {
                if stride != 1 {
                    return Err(Error::invalid(OP, format!("padding 'same' needs stride 1, got stride {stride}")));
                }
                let k = weight.shape()[2];
                let total = k.checked_sub(1).and_then(|k1| k1.checked_mul(dilation)).ok_or_else(|| {
                    Error::invalid(
                        OP,
                        format!("kernel {k} with dilation {dilation}: the span overflows or the kernel is empty"),
                    )
                })?;
                // Equal padding of ceil(total/2) on both sides, then drop the first output when
                // total is odd: PyTorch pads floor(total/2) on the left.
                let out = x.conv2d(&w, bias, (1, 1), (0, total.div_ceil(2)), (1, dilation), groups)?;
                let (skip, len) = (total % 2, self.shape()[2]);
                out.narrow(3, skip, skip + len)?
            }
        };
        out.squeeze(2)
    }
}
