//! `pooling.wgsl`: max, average and adaptive average pooling, forward and backward (window
//! parameters in `window.rs`).

use super::launch::{bind, check_len};
use super::pipelines::{self, Access};
use super::window::WindowParams;
use super::WgpuBackend;
use crate::backend::{ConvGeom, DType, Storage};
use crate::Result;

use Access::{Read as R, Write as W};

/// Bindings of every entry point: input, output, argmax (a placeholder for average pooling).
const SIGNATURE: [Access; 3] = [R, W, W];

impl WgpuBackend {
    pub(super) fn max_pool2d_kernel(&self, x: &Storage, geom: &ConvGeom) -> Result<(Storage, Storage)> {
        let op = "max_pool2d";
        let x = self.gpu(x, DType::F32, op)?;
        check_len(op, x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let n = geom.batch * geom.channels * geom.out_h * geom.out_w;
        let out = self.alloc(n, DType::F32, op)?;
        let arg = self.alloc(n, DType::U32, op)?;
        let params = WindowParams::of(geom, n, false);
        let buffers = [bind(x), bind(&out), bind(&arg)];
        self.run(&pipelines::POOLING, "max_pool2d", &SIGNATURE, &params, &buffers, self.groups_for(n, op)?)?;
        Ok((self.output(out), self.output(arg)))
    }

    pub(super) fn max_pool2d_backward_kernel(
        &self,
        grad: &Storage,
        argmax: &Storage,
        geom: &ConvGeom,
    ) -> Result<Storage> {
        let op = "max_pool2d";
        let (g, a) = (self.gpu(grad, DType::F32, op)?, self.gpu(argmax, DType::U32, op)?);
        let pooled = geom.batch * geom.channels * geom.out_h * geom.out_w;
        check_len(op, g, pooled)?;
        check_len(op, a, pooled)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, op)?;
        let params = WindowParams::of(geom, n, false);
        let buffers = [bind(g), bind(&out), bind(a)];
        self.run(&pipelines::POOLING, "max_pool2d_backward", &SIGNATURE, &params, &buffers, self.groups_for(n, op)?)?;
        Ok(self.output(out))
    }

    /// Average pooling over `geom`'s windows, or over adaptive ones.
    pub(super) fn avg_pool2d_kernel(
        &self,
        x: &Storage,
        geom: &ConvGeom,
        adaptive: bool,
        op: &'static str,
    ) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, op)?;
        let n = geom.batch * geom.channels * geom.out_h * geom.out_w;
        check_len(op, x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let out = self.alloc(n, DType::F32, op)?;
        let params = WindowParams::of(geom, n, adaptive);
        let buffers = [bind(x), bind(&out), self.unused()];
        self.run(&pipelines::POOLING, "avg_pool2d", &SIGNATURE, &params, &buffers, self.groups_for(n, op)?)?;
        Ok(self.output(out))
    }

    pub(super) fn avg_pool2d_backward_kernel(
        &self,
        grad: &Storage,
        geom: &ConvGeom,
        adaptive: bool,
        op: &'static str,
    ) -> Result<Storage> {
        let grad = self.gpu(grad, DType::F32, op)?;
        check_len(op, grad, geom.batch * geom.channels * geom.out_h * geom.out_w)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, op)?;
        let params = WindowParams::of(geom, n, adaptive);
        let buffers = [bind(grad), bind(&out), self.unused()];
        self.run(&pipelines::POOLING, "avg_pool2d_backward", &SIGNATURE, &params, &buffers, self.groups_for(n, op)?)?;
        Ok(self.output(out))
    }
}
