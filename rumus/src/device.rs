//! Where tensors live and which kernels run on them.

use std::fmt;
#[cfg(feature = "wgpu")]
use std::sync::Arc;

use crate::backend::cpu::CpuBackend;
#[cfg(feature = "wgpu")]
use crate::backend::wgpu::WgpuBackend;
use crate::backend::Backend;
use crate::{Error, MatmulPrecision, Result};

static CPU: CpuBackend = CpuBackend;

/// What [`Device::wgpu`] says when the GPU backend was left out of the build.
#[cfg(not(feature = "wgpu"))]
const WITHOUT_WGPU: &str = "rumus was built without the `wgpu` feature (enable it in Cargo.toml: \
     `rumus = { version = \"0.1\", features = [\"wgpu\"] }`, or keep the default features)";

/// A compute device. Cheap to clone; clones refer to the same device.
#[derive(Clone)]
pub enum Device {
    /// The host, with the multi-threaded CPU kernels.
    Cpu,
    /// A GPU through wgpu (Vulkan, Metal or DX12), with WGSL kernels. Every handle from
    /// [`Device::wgpu`] shares one backend; see [`Device::same`] for backends made apart. Only
    /// with the `wgpu` feature (on by default).
    #[cfg(feature = "wgpu")]
    Wgpu(Arc<WgpuBackend>),
}

impl Device {
    /// The host CPU.
    ///
    /// ```
    /// use rumus::{Device, RawTensor};
    ///
    /// let device = Device::cpu();
    /// assert!(device.is_cpu());
    /// let t = RawTensor::zeros(&[2, 3], &device)?;
    /// assert!(t.device().same(&device));
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn cpu() -> Self {
        Device::Cpu
    }

    /// The wgpu device (created on first use, then shared), on Vulkan, Metal or DX12, whichever
    /// the platform has; `RUMUS_WGPU_BACKEND=vulkan|metal|dx12|gl` forces one (another value is
    /// an error listing these). Fails with a message saying how to get an adapter when none
    /// exists, and with [`Error::Gpu`] naming the feature when rumus was built without its
    /// `wgpu` feature.
    #[cfg(feature = "wgpu")]
    pub fn wgpu() -> Result<Self> {
        Ok(Device::Wgpu(shared_wgpu()?))
    }

    /// Without the `wgpu` feature: [`Error::Gpu`] naming the feature.
    #[cfg(not(feature = "wgpu"))]
    pub fn wgpu() -> Result<Self> {
        Err(Error::Gpu(WITHOUT_WGPU.into()))
    }

    /// The fastest device available: `RUMUS_DEVICE=cpu|wgpu` decides when set, otherwise a real
    /// GPU adapter if one exists (never a CPU emulation such as lavapipe), else the CPU. Without
    /// the `wgpu` feature this is always the CPU (`RUMUS_DEVICE=wgpu` says so on stderr).
    pub fn best() -> Self {
        match std::env::var("RUMUS_DEVICE").ok().as_deref().map(str::trim) {
            Some("cpu") => return Device::Cpu,
            Some("wgpu") => {
                return match Self::wgpu() {
                    Ok(device) => device,
                    Err(e) => {
                        eprintln!("rumus: RUMUS_DEVICE=wgpu but {e}; using the CPU");
                        Device::Cpu
                    }
                }
            }
            Some(other) if !other.is_empty() => {
                eprintln!("rumus: RUMUS_DEVICE={other:?} is not cpu or wgpu; choosing automatically");
            }
            _ => {}
        }
        Self::hardware_gpu().unwrap_or(Device::Cpu)
    }

    /// The shared wgpu device if its adapter is a real GPU. When `RUMUS_WGPU_BACKEND` forces an
    /// API that gives no device, says so on stderr (the choice was the user's).
    #[cfg(feature = "wgpu")]
    fn hardware_gpu() -> Option<Self> {
        match shared_wgpu() {
            Ok(backend) if backend.context().is_hardware() => Some(Device::Wgpu(backend)),
            Ok(_) => None,
            Err(e) => {
                if std::env::var_os("RUMUS_WGPU_BACKEND").is_some_and(|v| !v.is_empty()) {
                    eprintln!("rumus: {e}; using the CPU");
                }
                None
            }
        }
    }

    #[cfg(not(feature = "wgpu"))]
    fn hardware_gpu() -> Option<Self> {
        None
    }

    /// The kernels of this device, for custom ops and optimizers.
    pub fn backend(&self) -> &dyn Backend {
        match self {
            Device::Cpu => &CPU,
            #[cfg(feature = "wgpu")]
            Device::Wgpu(backend) => &**backend,
        }
    }

    /// Short name for messages and summaries, e.g. `cpu`.
    pub fn name(&self) -> String {
        self.backend().name()
    }

    /// The largest tensor, in bytes, one kernel can bind on this device (`None`: no limit
    /// beyond host memory).
    pub fn max_tensor_bytes(&self) -> Option<u64> {
        match self {
            Device::Cpu => None,
            #[cfg(feature = "wgpu")]
            Device::Wgpu(backend) => {
                let limits = backend.context().limits();
                Some(limits.max_storage_buffer_binding_size.min(limits.max_buffer_size))
            }
        }
    }

    /// True for the CPU device.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// Always false without the `wgpu` feature.
    pub fn is_wgpu(&self) -> bool {
        !self.is_cpu()
    }

    /// True when both handles refer to the same device. Two wgpu backends are the same device
    /// only when they are one backend (clones of one handle, or `Device::wgpu()` twice): a
    /// second backend on the adapter (`WgpuBackend::independent()` and the like) records its
    /// commands apart, unordered with the first's, so its tensors do not mix with them.
    pub fn same(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            #[cfg(feature = "wgpu")]
            (Device::Wgpu(a), Device::Wgpu(b)) => Arc::ptr_eq(a, b),
            #[cfg(feature = "wgpu")]
            _ => false,
        }
    }

    /// Sets how f32 matmuls on this device compute, for every handle of it and every tensor
    /// on it (like PyTorch's global `allow_tf32`). [`MatmulPrecision::F16TensorCores`] needs a
    /// wgpu adapter with cooperative matrices (f16 16×16×16 with f32 accumulation, subgroups of
    /// 32); elsewhere it is an error, never a silent f32 fallback.
    pub fn set_matmul_precision(&self, precision: MatmulPrecision) -> Result<()> {
        match (self, precision) {
            #[cfg(feature = "wgpu")]
            (Device::Wgpu(backend), _) => backend.set_matmul_precision(precision),
            (Device::Cpu, MatmulPrecision::F32) => Ok(()),
            (Device::Cpu, _) => Err(Error::invalid(
                "set_matmul_precision",
                format!("the CPU backend has no {precision} matmul; only MatmulPrecision::F32"),
            )),
        }
    }

    /// How f32 matmuls on this device compute (see [`Device::set_matmul_precision`]).
    pub fn matmul_precision(&self) -> MatmulPrecision {
        match self {
            Device::Cpu => MatmulPrecision::F32,
            #[cfg(feature = "wgpu")]
            Device::Wgpu(backend) => backend.matmul_precision(),
        }
    }

    /// Waits until the start-up warm-up has compiled the kernels it compiles in the background
    /// (at most 60 s; a no-op on the CPU and with `RUMUS_WGPU_WARMUP=0`). Until then some ops
    /// run stand-ins, slower kernels that compile sooner, so a benchmark of steady-state speed
    /// calls this before timing.
    pub fn wait_for_kernels(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(_) => crate::backend::wgpu::wait_for_warmup(std::time::Duration::from_secs(60)),
        }
    }

    /// Waits until all work queued on this device has finished (a no-op on the CPU, whose
    /// kernels finish before they return). For timing; reads back nothing.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(backend) => backend.synchronize(),
        }
    }
}

/// The process-wide wgpu backend, its start-up warm-up started (see `warmup.rs`).
#[cfg(feature = "wgpu")]
fn shared_wgpu() -> Result<Arc<WgpuBackend>> {
    let backend = WgpuBackend::shared()?;
    crate::warmup::start_once(&backend);
    Ok(backend)
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

#[cfg(all(test, not(feature = "wgpu")))]
mod without_wgpu {
    use super::*;

    #[test]
    fn the_gpu_is_an_error_naming_the_feature_and_the_best_device_is_the_cpu() {
        match Device::wgpu() {
            Err(Error::Gpu(message)) => assert!(message.contains("without the `wgpu` feature"), "{message}"),
            other => panic!("expected Error::Gpu, got {other:?}"),
        }
        assert!(Device::best().is_cpu());
        assert!(!Device::cpu().is_wgpu());
    }
}
