//! Moving data: uploads, readbacks and the strided copy of `copy_strided.wgsl`, and the axis
//! merging that the strided kernels (this one and `binary.wgsl`) share.

use bytemuck::cast_slice;

use super::launch::{bind, check_extent};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{DType, Storage};
use crate::{Error, Layout, Result};

use Access::{Read as R, Write as W};

/// Most axes a strided kernel takes in its parameters (after merging axes that are contiguous in
/// every operand); views of more go through `copy_strided_any`, which reads them from a buffer.
pub(super) const MAX_RANK: usize = 8;

kernel_params! {
    /// `copy_strided.wgsl`: `n` elements of a view of `rank` axes (`shape`, padded with 1) from
    /// `src` at `src_strides` to `dst` at `dst_strides` (padded with 0).
    struct CopyParams {
        n: u32,
        rank: u32,
        src_offset: u32,
        dst_offset: u32,
        shape: [u32; MAX_RANK],
        src_strides: [u32; MAX_RANK],
        dst_strides: [u32; MAX_RANK],
    }
}

impl WgpuBackend {
    pub(super) fn upload_f32(&self, data: &[f32]) -> Result<Storage> {
        self.upload(cast_slice(data), data.len(), DType::F32, "from_vec")
    }

    /// Indices, which carry their largest value as the bound the index checks trust.
    pub(super) fn upload_u32(&self, data: &[u32]) -> Result<Storage> {
        let storage = self.upload(cast_slice(data), data.len(), DType::U32, "from_indices")?;
        if let Storage::Wgpu(s) = &storage {
            s.set_bound(Some(data.iter().copied().max().unwrap_or(0)));
        }
        Ok(storage)
    }

    fn upload(&self, bytes: &[u8], len: usize, dtype: DType, op: &str) -> Result<Storage> {
        let out = self.alloc(len, dtype, op)?;
        if !bytes.is_empty() {
            // Staged through the shared encoder (not queue.write_buffer) so the write stays ordered
            // after earlier kernels that may still read this pooled buffer.
            let staging = self.ctx.device.create_buffer(&::wgpu::BufferDescriptor {
                label: Some("rumus upload"),
                size: bytes.len() as u64,
                usage: ::wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            staging
                .get_mapped_range_mut(..)
                .map_err(|e| Error::Gpu(format!("{op}: mapping an upload buffer: {e}")))?
                .copy_from_slice(bytes);
            staging.unmap();
            self.recorder.upload(&self.ctx, &staging, out.buffer(), bytes.len() as u64)?;
        }
        Ok(self.output(out))
    }

    /// The view `layout` of `src`, read back as 32-bit words.
    pub(super) fn read_words(&self, src: &Storage, layout: &Layout, dtype: DType, op: &'static str) -> Result<Vec<u8>> {
        let s = self.gpu(src, dtype, op)?;
        let n = layout.numel();
        if n == 0 {
            return self.recorder.read(&self.ctx, s.buffer(), 0, 0);
        }
        if layout.is_contiguous() {
            check_extent(op, layout, s.len())?;
            return self.recorder.read(&self.ctx, s.buffer(), layout.offset() as u64 * 4, n as u64 * 4);
        }
        let tmp = self.alloc(n, dtype, op)?;
        self.copy_kernel(s, layout, &tmp, &Layout::contiguous(layout.shape()), op)?;
        self.recorder.read(&self.ctx, tmp.buffer(), 0, n as u64 * 4)
    }

    pub(super) fn copy_strided_kernel(
        &self,
        src: &Storage,
        src_layout: &Layout,
        dst: &Storage,
        dst_layout: &Layout,
    ) -> Result<()> {
        let dtype = dst.dtype();
        let s = self.gpu(src, dtype, "copy")?;
        let d = self.gpu(dst, dtype, "copy")?;
        if src_layout.shape() != dst_layout.shape() {
            return Err(Error::shape(
                "copy",
                format!("source {:?} and destination {:?} differ", src_layout.shape(), dst_layout.shape()),
            ));
        }
        if src.same_memory(dst) {
            // One buffer cannot be bound for reading and writing at once: stage through a copy.
            let tmp = self.alloc(src_layout.numel(), dtype, "copy")?;
            let contiguous = Layout::contiguous(src_layout.shape());
            self.copy_kernel(s, src_layout, &tmp, &contiguous, "copy")?;
            return self.copy_kernel(&tmp, &contiguous, d, dst_layout, "copy");
        }
        self.copy_kernel(s, src_layout, d, dst_layout, "copy")
    }

    pub(super) fn copy_kernel(
        &self,
        src: &WgpuStorage,
        sl: &Layout,
        dst: &WgpuStorage,
        dl: &Layout,
        op: &'static str,
    ) -> Result<()> {
        let n = sl.numel();
        if n == 0 {
            return Ok(());
        }
        check_extent(op, sl, src.len())?;
        check_extent(op, dl, dst.len())?;
        self.copy_recorded(src, sl, dst, dl, op)?;
        if dst.dtype() == DType::U32 {
            // What the host knows of the values: the source's bound, and the destination's own
            // where the copy leaves some of it.
            let covers_all = dl.is_contiguous() && dl.offset() == 0 && n == dst.len();
            let kept = if covers_all { Some(0) } else { dst.bound() };
            dst.set_bound(kept.zip(src.bound()).map(|(a, b)| a.max(b)));
        }
        Ok(())
    }

    /// Records the copy kernel for `copy_kernel` (views checked, at least one element).
    fn copy_recorded(
        &self,
        src: &WgpuStorage,
        sl: &Layout,
        dst: &WgpuStorage,
        dl: &Layout,
        op: &'static str,
    ) -> Result<()> {
        let n = sl.numel();
        let (shape, strides) = coalesce(sl.shape(), &[sl.strides(), dl.strides()]);
        let mut params = CopyParams {
            n: n as u32,
            rank: shape.len() as u32,
            src_offset: sl.offset() as u32,
            dst_offset: dl.offset() as u32,
            shape: [0; MAX_RANK],
            src_strides: [0; MAX_RANK],
            dst_strides: [0; MAX_RANK],
        };
        let groups = self.groups_for(n, op)?;
        if shape.len() > MAX_RANK {
            // Too many axes for the parameters: they go in a buffer of their own.
            let axes: Vec<u32> = shape.iter().chain(&strides[0]).chain(&strides[1]).map(|&v| v as u32).collect();
            let Storage::Wgpu(axes) = self.upload_u32(&axes)? else {
                return Err(Error::Gpu(format!("{op}: an upload left the device")));
            };
            let buffers = [bind(src), bind(dst), bind(&axes)];
            return self.run(&pipelines::COPY_STRIDED, "copy_strided_any", &[R, W, R], &params, &buffers, groups);
        }
        params.shape = padded(&shape, 1);
        params.src_strides = padded(&strides[0], 0);
        params.dst_strides = padded(&strides[1], 0);
        self.run(&pipelines::COPY_STRIDED, "copy_strided", &[R, W], &params, &[bind(src), bind(dst)], groups)
    }
}

/// Drops size-1 axes and merges neighbours that are contiguous in every operand, so common views
/// need few axes.
pub(super) fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for axis in 0..shape.len() {
        if shape[axis] == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().enumerate().all(|(k, s)| out_strides[k].last() == Some(&(s[axis] * shape[axis])));
        if mergeable {
            if let Some(last) = out_shape.last_mut() {
                *last *= shape[axis];
            }
            for (k, s) in strides.iter().enumerate() {
                if let Some(last) = out_strides[k].last_mut() {
                    *last = s[axis];
                }
            }
        } else {
            out_shape.push(shape[axis]);
            for (k, s) in strides.iter().enumerate() {
                out_strides[k].push(s[axis]);
            }
        }
    }
    if out_shape.is_empty() {
        out_shape.push(1);
        for s in &mut out_strides {
            s.push(0);
        }
    }
    (out_shape, out_strides)
}

/// The first `MAX_RANK` of `values` as u32 words, padded with `fill`.
pub(super) fn padded(values: &[usize], fill: u32) -> [u32; MAX_RANK] {
    let mut v = [fill; MAX_RANK];
    for (slot, &x) in v.iter_mut().zip(values) {
        *slot = x as u32;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::coalesce;

    #[test]
    fn coalesce_merges_contiguous_axes_and_drops_unit_axes() {
        let (shape, strides) = coalesce(&[2, 3, 4], &[&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(shape, vec![24]);
        assert_eq!(strides, vec![vec![1], vec![1]]);
        // Transposed second operand: nothing merges across the swapped axes.
        let (shape, strides) = coalesce(&[3, 1, 4], &[&[4, 4, 1], &[1, 1, 3]]);
        assert_eq!(shape, vec![3, 4]);
        assert_eq!(strides, vec![vec![4, 1], vec![1, 3]]);
        let (shape, _) = coalesce(&[1, 1], &[&[1, 1]]);
        assert_eq!(shape, vec![1]);
    }
}
