//! `im2col.wgsl` and `col2im.wgsl`: a convolution's input unfolded into columns, and the
//! columns' gradient folded back (window parameters in `window.rs`).

use super::launch::{bind, check_len};
use super::pipelines::{self, Access};
use super::window::WindowParams;
use super::WgpuBackend;
use crate::backend::{ConvGeom, DType, Storage};
use crate::Result;

use Access::{Read as R, Write as W};

const OP: &str = "conv2d";

impl WgpuBackend {
    pub(super) fn im2col_kernel(&self, x: &Storage, geom: &ConvGeom) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, OP)?;
        check_len(OP, x, geom.batch * geom.channels * geom.in_h * geom.in_w)?;
        let n = geom.batch * geom.channels * geom.kernel_h * geom.kernel_w * geom.out_h * geom.out_w;
        let out = self.alloc(n, DType::F32, OP)?;
        let params = WindowParams::of(geom, n, false);
        self.run(&pipelines::IM2COL, "im2col", &[R, W], &params, &[bind(x), bind(&out)], self.groups_for(n, OP)?)?;
        Ok(self.output(out))
    }

    pub(super) fn col2im_kernel(&self, cols: &Storage, geom: &ConvGeom) -> Result<Storage> {
        let c = self.gpu(cols, DType::F32, OP)?;
        check_len(OP, c, geom.batch * geom.channels * geom.kernel_h * geom.kernel_w * geom.out_h * geom.out_w)?;
        let n = geom.batch * geom.channels * geom.in_h * geom.in_w;
        let out = self.alloc(n, DType::F32, OP)?;
        let params = WindowParams::of(geom, n, false);
        self.run(&pipelines::COL2IM, "col2im", &[R, W], &params, &[bind(c), bind(&out)], self.groups_for(n, OP)?)?;
        Ok(self.output(out))
    }
}
