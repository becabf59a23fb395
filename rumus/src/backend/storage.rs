//! Device memory behind a tensor.

use std::sync::Arc;

use super::cpu::CpuStorage;
#[cfg(feature = "wgpu")]
use super::wgpu::WgpuStorage;

/// Element type of a storage. f32 for values, u32 for class targets and indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 32-bit unsigned integer.
    U32,
}

impl DType {
    /// `"f32"` or `"u32"`, as error messages spell it.
    pub fn name(&self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::U32 => "u32",
        }
    }
}

/// Shared, device-resident memory. Cloning shares; views share one storage.
#[derive(Clone, Debug)]
pub enum Storage {
    /// In host memory, for the CPU backend.
    Cpu(Arc<CpuStorage>),
    /// On the GPU (only with the `wgpu` feature).
    #[cfg(feature = "wgpu")]
    Wgpu(Arc<WgpuStorage>),
}

impl Storage {
    /// Element type of the memory.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(s) => s.dtype(),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => s.dtype(),
        }
    }

    /// Number of elements held.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(s) => s.len(),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(s) => s.len(),
        }
    }

    /// True when no element is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when both handles share the same memory.
    pub fn same_memory(&self, other: &Storage) -> bool {
        match (self, other) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Arc::ptr_eq(a, b),
            #[cfg(feature = "wgpu")]
            (Storage::Wgpu(a), Storage::Wgpu(b)) => Arc::ptr_eq(a, b),
            #[cfg(feature = "wgpu")]
            _ => false,
        }
    }
}
