//! What every kernel launcher shares: checking and allocating storages, workgroup counts, and
//! recording one dispatch with its parameters.

use std::sync::Arc;

use super::encoder::Binding;
use super::params::KernelParams;
use super::pipelines::{Access, Shader};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{DType, Storage};
use crate::{Error, Layout, Result};

/// Invocations per workgroup of the 1-D kernels.
pub(super) const WG: usize = 256;

impl WgpuBackend {
    /// The wgpu storage behind `s`, checked for element type and for belonging to this backend
    /// (another backend's commands are not ordered with this one's).
    pub(super) fn gpu<'a>(&self, s: &'a Storage, dtype: DType, op: &'static str) -> Result<&'a WgpuStorage> {
        let w = gpu(s, dtype, op)?;
        if !w.belongs_to(&self.pool) {
            return Err(Error::DeviceMismatch { op, lhs: "wgpu".into(), rhs: "another wgpu backend".into() });
        }
        Ok(w)
    }

    pub(super) fn alloc(&self, len: usize, dtype: DType, op: &str) -> Result<Arc<WgpuStorage>> {
        let bytes = (len as u64 * 4).max(4);
        let buffer = self.pool.acquire(&self.ctx.device, &self.ctx.limits, bytes, op)?;
        Ok(Arc::new(WgpuStorage::new(buffer, len, dtype, self.pool.clone())))
    }

    /// A storage of `len` zeros (cleared by the encoder, no kernel).
    pub(super) fn zeroed(&self, len: usize, dtype: DType, op: &str) -> Result<Arc<WgpuStorage>> {
        let out = self.alloc(len, dtype, op)?;
        if len > 0 {
            let size = len as u64 * 4;
            self.recorder.record(&self.ctx, |enc| enc.clear_buffer(out.buffer(), 0, Some(size)));
        }
        Ok(out)
    }

    pub(super) fn output(&self, storage: Arc<WgpuStorage>) -> Storage {
        Storage::Wgpu(storage)
    }

    /// The placeholder bound where a kernel declares a buffer its entry point does not use.
    pub(super) fn unused(&self) -> Binding<'_> {
        Binding { buffer: &self.dummy, bytes: 4 }
    }

    /// Workgroups covering `threads` invocations of a 256-wide kernel, split over x and y so no
    /// dimension exceeds the adapter's limit (65,535 on most).
    pub(super) fn groups_for(&self, threads: usize, op: &str) -> Result<[u32; 3]> {
        self.groups_2d(threads.div_ceil(WG), op)
    }

    fn groups_2d(&self, groups: usize, op: &str) -> Result<[u32; 3]> {
        let max = self.max_groups;
        let x = groups.min(max);
        let y = groups.div_ceil(x.max(1));
        if y > max {
            return Err(Error::Gpu(format!("{op}: {groups} workgroups exceed the adapter's dispatch limit")));
        }
        Ok([x as u32, y as u32, 1])
    }

    /// Workgroups for kernels that walk rows with a grid stride: one per row up to one
    /// dispatch dimension (65,535 workgroups keep any GPU busy); beyond, each takes several rows.
    pub(super) fn groups_rows(&self, rows: usize) -> [u32; 3] {
        let max = self.max_groups;
        [rows.min(max) as u32, 1, 1]
    }

    /// Records `entry` of `shader` with `params` (the shader's `struct Params`) at binding 0 and
    /// `buffers` at 1.. as `signature` declares them.
    pub(super) fn run<P: KernelParams>(
        &self,
        shader: &Shader,
        entry: &'static str,
        signature: &[Access],
        params: &P,
        buffers: &[Binding<'_>],
        groups: [u32; 3],
    ) -> Result<()> {
        if shader.params != P::LAYOUT {
            return Err(Error::Gpu(format!(
                "{}.wgsl takes {} parameters, launched with {}",
                shader.name,
                shader.params.name,
                P::LAYOUT.name
            )));
        }
        let kernel = self.pipelines.get(&self.ctx.device, shader, entry, signature)?;
        self.recorder.dispatch(&self.ctx, &kernel, bytemuck::bytes_of(params), buffers, groups)
    }
}

/// The wgpu storage behind `s`, checked for element type.
fn gpu<'a>(s: &'a Storage, dtype: DType, op: &'static str) -> Result<&'a WgpuStorage> {
    match s {
        Storage::Wgpu(w) if w.dtype() == dtype => Ok(w),
        Storage::Wgpu(w) => Err(Error::DType { op, expected: dtype.name(), got: w.dtype().name() }),
        Storage::Cpu(_) => Err(Error::DeviceMismatch { op, lhs: "cpu".into(), rhs: "wgpu".into() }),
    }
}

pub(super) fn bind(s: &WgpuStorage) -> Binding<'_> {
    Binding { buffer: s.buffer(), bytes: s.bytes() }
}

pub(super) fn check_len(op: &'static str, s: &WgpuStorage, needed: usize) -> Result<()> {
    if s.len() < needed {
        return Err(Error::invalid(op, format!("storage holds {} elements, the kernel needs {needed}", s.len())));
    }
    Ok(())
}

/// Largest element a view touches must lie inside the storage.
pub(super) fn check_extent(op: &'static str, layout: &Layout, len: usize) -> Result<()> {
    if layout.numel() == 0 {
        return Ok(());
    }
    let last = layout.offset()
        + layout.shape().iter().zip(layout.strides()).map(|(&d, &s)| d.saturating_sub(1) * s).sum::<usize>();
    if last >= len {
        return Err(Error::invalid(
            op,
            format!("view {:?} reaches element {last} of a storage of {len}", layout.shape()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::pipelines::{Access, FILL};
    use super::super::softmax::SoftmaxParams;
    use super::super::WgpuBackend;
    use super::bind;
    use crate::backend::DType;
    use crate::Error;

    /// A kernel launched with another family's parameter struct is refused before anything is
    /// recorded, so the output keeps its contents.
    #[test]
    fn a_launch_with_another_kernels_parameters_is_an_error() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let b = WgpuBackend::independent().unwrap();
        let out = b.zeroed(4, DType::F32, "test").unwrap();
        let params = SoftmaxParams { rows: 4, cols: 1, log: 0, neg_inf: f32::NEG_INFINITY };
        let err = b.run(&FILL, "fill", &[Access::Write], &params, &[bind(&out)], [1, 1, 1]).unwrap_err();
        assert!(matches!(&err, Error::Gpu(m) if m.contains("FillParams") && m.contains("SoftmaxParams")), "{err}");
        let data = super::super::test_data::read(&b, &b.output(out));
        assert_eq!(data, vec![0.0; 4]);
    }
}
