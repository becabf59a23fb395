//! Direct convolution (`conv2d_direct.wgsl`): the stand-in a convolution runs until the start-up
//! warm-up has compiled its fused kernels (`conv2d.rs`; see `Pipelines::stand_in`).
//!
//! These loops compile far sooner than the fused kernels, and the warm-up compiles them first:
//! a training step that comes before the fused kernels are ready runs these instead of waiting
//! (figures in BENCHMARKS.md). Only small convolutions do: the loops read every input once per
//! output, which is cheap at LeNet sizes but would cost more than the wait at ResNet sizes. The two kinds add the same products in different orders, so their results differ by
//! rounding only.

use super::conv2d::{params, Dims, SIGNATURE};
use super::launch::bind;
use super::pipelines;
use super::{WgpuBackend, WgpuStorage, STAND_IN_MAX_MACS};
use crate::backend::{Conv2dArgs, DType, ReduceDims, ReduceOp, Storage};
use crate::Result;

const OP: &str = "conv2d";

impl WgpuBackend {
    /// Whether this convolution runs the direct stand-in for `entry` of `conv2d.wgsl`.
    pub(super) fn conv2d_stand_in(&self, entry: &'static str, d: &Dims) -> bool {
        let macs = d.output.saturating_mul(d.weight_cols);
        macs <= STAND_IN_MAX_MACS && self.pipelines.stand_in(&pipelines::CONV2D, entry)
    }

    pub(super) fn conv2d_direct_forward(
        &self,
        x: &WgpuStorage,
        w: &WgpuStorage,
        bias: Option<&WgpuStorage>,
        a: &Conv2dArgs,
        d: &Dims,
    ) -> Result<Storage> {
        self.conv2d_direct("conv2d_direct_forward", d.output, a, [Some(x), Some(w), None, bias])
    }

    pub(super) fn conv2d_direct_input_grad(
        &self,
        w: &WgpuStorage,
        grad: &WgpuStorage,
        a: &Conv2dArgs,
        d: &Dims,
    ) -> Result<Storage> {
        self.conv2d_direct("conv2d_direct_input_grad", d.input, a, [None, Some(w), Some(grad), None])
    }

    /// Each sample's share of the weight gradient, [n, o, c/g·kh·kw], summed over the batch.
    pub(super) fn conv2d_direct_weight_grad(
        &self,
        x: &WgpuStorage,
        grad: &WgpuStorage,
        a: &Conv2dArgs,
        d: &Dims,
    ) -> Result<Storage> {
        let batch = a.geom.batch;
        let inputs = [Some(x), None, Some(grad), None];
        let shares = self.conv2d_direct("conv2d_direct_weight_grad", batch * d.weight, a, inputs)?;
        if batch == 1 {
            return Ok(shares);
        }
        self.reduce_kernel(ReduceOp::Sum, &shares, ReduceDims { outer: 1, len: batch, inner: d.weight })
    }

    /// One invocation per value of `entry`'s `n` outputs, from the inputs bound in
    /// `conv2d.wgsl`'s order (x, weight, grad, bias; `None` where the entry reads none).
    fn conv2d_direct(
        &self,
        entry: &'static str,
        n: usize,
        a: &Conv2dArgs,
        inputs: [Option<&WgpuStorage>; 4],
    ) -> Result<Storage> {
        let out = self.alloc(n, DType::F32, OP)?;
        let [x, w, grad, bias] = inputs.map(|input| input.map_or(self.unused(), bind));
        let buffers = [x, w, grad, bias, bind(&out)];
        let params = params(a, n, inputs[3].is_some(), 0);
        let groups = self.groups_for(n, OP)?;
        self.run(&pipelines::CONV2D_DIRECT, entry, &SIGNATURE, &params, &buffers, groups)?;
        Ok(self.output(out))
    }
}

#[cfg(test)]
mod tests {
    use super::super::pipelines::{KernelState, CONV2D, CONV2D_DIRECT};
    use super::super::test_data::{normal, read};
    use super::super::WgpuBackend;
    use crate::backend::{Backend, Conv2dArgs, Conv2dWanted, ConvGeom};
    use crate::testing::assert_close;

    /// The direct kernels against the fused ones (themselves checked against the CPU and by
    /// finite differences), reached the way a training step reaches them: through the backend's
    /// conv2d ops while the fused kernels count as compiling on another thread. A backend of its
    /// own, so that no other test sees those kernels held.
    #[test]
    fn direct_kernels_match_the_fused_ones_while_those_compile() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let b = WgpuBackend::independent().unwrap();
        let geometry = |batch, channels, size, kernel, [stride, pad, dilation]: [usize; 3]| {
            ConvGeom::square(batch, channels, size, kernel, stride, pad, dilation).unwrap()
        };
        // (geometry, out channels, groups, bias): padding, stride 2, dilation 2, groups,
        // depthwise, LeNet's first layer.
        let cases = [
            (geometry(2, 3, (9, 8), 5, [1, 2, 1]), 6, 1, true),
            (geometry(3, 4, (11, 10), 3, [2, 1, 1]), 5, 1, false),
            (geometry(1, 4, (12, 9), 3, [1, 2, 2]), 6, 2, true),
            (geometry(2, 6, (7, 7), 3, [2, 1, 1]), 6, 6, false),
            (geometry(2, 1, (28, 28), 5, [1, 2, 1]), 6, 1, true),
        ];
        for (k, (geom, out_channels, groups, has_bias)) in cases.into_iter().enumerate() {
            let a = Conv2dArgs { geom, out_channels, groups };
            let seed = 10 * k as u32;
            let x = normal(&b, geom.batch * geom.channels * geom.in_h * geom.in_w, seed);
            let w = normal(&b, out_channels * geom.channels / groups * geom.kernel_h * geom.kernel_w, seed + 1);
            let bias = has_bias.then(|| normal(&b, out_channels, seed + 2));
            let grad = normal(&b, geom.batch * out_channels * geom.out_h * geom.out_w, seed + 3);
            let wanted = Conv2dWanted { x: true, weight: true, bias: has_bias };
            let run = || {
                let y = b.conv2d(&x, &w, bias.as_ref(), &a).unwrap().unwrap();
                (y, b.conv2d_backward(&x, &w, &grad, &a, wanted).unwrap())
            };
            let (y, grads) = run();
            let slots = ["conv2d_forward", "conv2d_input_grad", "conv2d_weight_grad"]
                .map(|entry| b.pipelines.hold_as_compiling(&CONV2D, entry));
            let held: Vec<_> = slots.iter().map(|slot| slot.lock().unwrap()).collect();
            let (y_direct, grads_direct) = run();
            drop(held);
            for entry in ["conv2d_direct_forward", "conv2d_direct_input_grad", "conv2d_direct_weight_grad"] {
                assert_eq!(b.pipelines.state(&CONV2D_DIRECT, entry), KernelState::Compiled, "{entry} never ran");
            }
            let pairs = [
                ("output", Some(y_direct), Some(y)),
                ("input grad", grads_direct.x, grads.x),
                ("weight grad", grads_direct.weight, grads.weight),
                ("bias grad", grads_direct.bias, grads.bias),
            ];
            for (what, direct, fused) in pairs {
                assert_eq!(direct.is_some(), fused.is_some(), "case {k}: {what} returned by one path only");
                if let (Some(direct), Some(fused)) = (direct, fused) {
                    assert_close(&format!("case {k} {what}"), &read(&b, &direct), &read(&b, &fused), 1e-4);
                }
            }
        }
    }
}
