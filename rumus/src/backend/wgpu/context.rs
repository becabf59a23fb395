//! One wgpu instance, adapter, device and queue per process, created on first use. The adapter
//! comes from Vulkan, Metal or DX12, whichever this platform has (`RUMUS_WGPU_BACKEND` forces
//! one); `RUMUS_WGPU_ADAPTER` (an index or a PCI bus id) or, under an MPI launcher, the local
//! rank chooses among several, so each process of a job on one host takes its own GPU.

use std::sync::{Arc, Mutex, OnceLock};

use super::runtime_dir;
use crate::{Error, Result};

/// What the kernels may use on this adapter, decided once at start.
pub struct WgpuContext {
    pub(crate) device: ::wgpu::Device,
    pub(crate) queue: ::wgpu::Queue,
    pub(crate) info: ::wgpu::AdapterInfo,
    pub(crate) limits: ::wgpu::Limits,
    /// Subgroup operations are available (reductions use them instead of shared memory).
    pub(crate) subgroups: bool,
    /// Timestamp queries are available (used by benchmarks).
    pub(crate) timestamps: bool,
    /// The adapter reports SHADER_F16 (requested only for the tensor-core matmul).
    pub(crate) reports_f16: bool,
    /// The device was opened with cooperative matrices and f16, for `matmul_coop.wgsl`.
    pub(crate) tensor_cores: bool,
    /// The first error the driver reported outside an error scope, surfaced at the next sync.
    pub(crate) uncaptured: Arc<Mutex<Option<String>>>,
}

/// What the tensor-core matmul needs of the device.
const TENSOR_CORE_FEATURES: ::wgpu::Features =
    ::wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX.union(::wgpu::Features::SHADER_F16);

static CONTEXT: OnceLock<std::result::Result<Arc<WgpuContext>, String>> = OnceLock::new();

const NO_ADAPTER_HELP: &str = "no wgpu adapter found. Install a Vulkan driver for your GPU (Linux, \
     Windows; Metal on macOS and DX12 on Windows 10+ need none), or Mesa's lavapipe CPU emulation for \
     testing (`apt-get install mesa-vulkan-drivers libvulkan1`), or use Device::cpu()";

/// Forces the graphics API of the adapter: one of [`BACKEND_NAMES`]' names.
const BACKEND_ENV: &str = "RUMUS_WGPU_BACKEND";

/// The values of `RUMUS_WGPU_BACKEND` and the API each selects.
const BACKEND_NAMES: [(&str, ::wgpu::Backends); 4] = [
    ("vulkan", ::wgpu::Backends::VULKAN),
    ("metal", ::wgpu::Backends::METAL),
    ("dx12", ::wgpu::Backends::DX12),
    ("gl", ::wgpu::Backends::GL),
];

/// The APIs tried when none is forced: wgpu's first tier (GL only when forced).
const DEFAULT_BACKENDS: ::wgpu::Backends =
    ::wgpu::Backends::VULKAN.union(::wgpu::Backends::METAL).union(::wgpu::Backends::DX12);

/// The APIs an adapter may come from, given `RUMUS_WGPU_BACKEND`'s value (`None`: unset) and the
/// APIs compiled into this build for this platform. An unknown name, or an API this build
/// lacks, is an error naming the valid choices.
fn choose_backends(forced: Option<&str>, compiled: ::wgpu::Backends) -> std::result::Result<::wgpu::Backends, String> {
    let name = match forced.map(str::trim) {
        None | Some("") => return Ok(DEFAULT_BACKENDS),
        Some(name) => name,
    };
    let names = BACKEND_NAMES.map(|(n, _)| n).join(", ");
    let Some(&(known, backends)) = BACKEND_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
        return Err(format!("{BACKEND_ENV}={name:?} is not a graphics API; use one of {names} (or leave it unset)"));
    };
    if !compiled.contains(backends) {
        let here: Vec<&str> = BACKEND_NAMES.iter().filter(|(_, b)| compiled.contains(*b)).map(|(n, _)| *n).collect();
        return Err(format!(
            "{BACKEND_ENV}={known}, but this build has no {known} backend on this platform (it has: {})",
            here.join(", ")
        ));
    }
    Ok(backends)
}

/// Chooses the adapter by index or PCI bus id (one process per GPU).
const ADAPTER_ENV: &str = "RUMUS_WGPU_ADAPTER";

/// The launcher variables holding this process's rank among those on its host (Open MPI,
/// MPICH/Intel MPI, Slurm): the default adapter index of a distributed job.
const LOCAL_RANK_ENVS: [&str; 3] = ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"];

/// The adapter `RUMUS_WGPU_ADAPTER` names (an index into the adapters, GPUs first, or a PCI bus
/// id such as `0000:3b:00.0`), else, under an MPI launcher, the one at the local rank (modulo
/// the GPUs present), else `None`: wgpu's high-performance choice.
fn pick_adapter(
    instance: &::wgpu::Instance,
    backends: ::wgpu::Backends,
) -> std::result::Result<Option<::wgpu::Adapter>, String> {
    let named = std::env::var(ADAPTER_ENV).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let local_rank =
        LOCAL_RANK_ENVS.iter().find_map(|name| std::env::var(name).ok().and_then(|v| v.trim().parse::<usize>().ok()));
    if named.is_none() && local_rank.is_none() {
        return Ok(None);
    }
    let mut adapters = pollster::block_on(instance.enumerate_adapters(backends));
    // Real GPUs first (stable: the driver's order otherwise), so indices 0.. are the GPUs.
    adapters.sort_by_key(|a| !is_gpu(&a.get_info()));
    let infos: Vec<::wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
    let index = match named {
        Some(name) => Some(adapter_index(&name, &infos)?),
        None => {
            let gpus = infos.iter().filter(|i| is_gpu(i)).count();
            let count = if gpus > 0 { gpus } else { infos.len() };
            local_rank.filter(|_| count > 0).map(|r| r % count)
        }
    };
    Ok(index.map(|i| adapters.swap_remove(i)))
}

fn is_gpu(info: &::wgpu::AdapterInfo) -> bool {
    matches!(info.device_type, ::wgpu::DeviceType::DiscreteGpu | ::wgpu::DeviceType::IntegratedGpu)
}

/// The position in `infos` that `name` (an index or a PCI bus id) names; an error listing them.
fn adapter_index(name: &str, infos: &[::wgpu::AdapterInfo]) -> std::result::Result<usize, String> {
    let found = match name.parse::<usize>() {
        Ok(i) => (i < infos.len()).then_some(i),
        Err(_) => {
            let bus = |id: &str| id.trim().to_ascii_lowercase().trim_start_matches("0000:").to_string();
            infos.iter().position(|i| !i.device_pci_bus_id.is_empty() && bus(&i.device_pci_bus_id) == bus(name))
        }
    };
    found.ok_or_else(|| {
        let list: Vec<String> = infos
            .iter()
            .enumerate()
            .map(|(k, i)| format!("{k}: {} ({:?}, PCI {:?})", i.name, i.backend, i.device_pci_bus_id))
            .collect();
        format!("{ADAPTER_ENV}={name:?} names no adapter; the adapters are [{}]", list.join("; "))
    })
}

impl WgpuContext {
    /// The shared context, created on the first call. Every later call returns the same one (or
    /// the same error).
    pub fn get() -> Result<Arc<WgpuContext>> {
        CONTEXT.get_or_init(|| Self::create().map(Arc::new)).clone().map_err(Error::Gpu)
    }

    fn create() -> std::result::Result<WgpuContext, String> {
        runtime_dir::ensure();
        let forced = std::env::var(BACKEND_ENV).ok();
        let backends = choose_backends(forced.as_deref(), ::wgpu::Instance::enabled_backend_features())?;
        let mut desc = ::wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        desc.backends = backends;
        let instance = ::wgpu::Instance::new(desc);
        let options = ::wgpu::RequestAdapterOptions {
            power_preference: ::wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            // Real limits: bucketing only matters for untrusted (browser) content.
            apply_limit_buckets: false,
        };
        let adapter = match pick_adapter(&instance, backends)? {
            Some(adapter) => adapter,
            None => pollster::block_on(instance.request_adapter(&options))
                .map_err(|e| format!("{NO_ADAPTER_HELP} (tried {backends:?}: {e})"))?,
        };
        let info = adapter.get_info();
        let available = adapter.features();
        // Ask only for what the kernels use. SHADER_F16 only together with cooperative
        // matrices, for the opt-in tensor-core matmul; adapters that report f16 alone must
        // work like any other.
        let tensor_cores = Self::supports_tensor_core_matmul(&adapter, &info);
        let wanted = ::wgpu::Features::SUBGROUP | ::wgpu::Features::TIMESTAMP_QUERY;
        let mut features = available & wanted;
        if tensor_cores {
            features |= TENSOR_CORE_FEATURES;
        }
        // The adapter's own limits, not the WebGPU defaults (which cap bindings at 128 MiB).
        let limits = adapter.limits();
        let device_desc = ::wgpu::DeviceDescriptor {
            label: Some("rumus"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: if tensor_cores {
                // SAFETY: wgpu calls cooperative matrices experimental because its validation of
                // them is incomplete. Only `matmul_coop.wgsl` uses them, and its dispatcher
                // checks every operand's extent and alignment against the buffers first.
                unsafe { ::wgpu::ExperimentalFeatures::enabled() }
            } else {
                ::wgpu::ExperimentalFeatures::disabled()
            },
            memory_hints: ::wgpu::MemoryHints::Performance,
            trace: ::wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&device_desc))
            .map_err(|e| format!("cannot open the wgpu device on adapter {:?}: {e}", info.name))?;
        let uncaptured = Arc::new(Mutex::new(None::<String>));
        let sink = uncaptured.clone();
        // The default handler panics; keep the first message and report it as an error instead.
        device.on_uncaptured_error(Arc::new(move |e: ::wgpu::Error| {
            let mut slot = sink.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        Ok(WgpuContext {
            device,
            queue,
            limits,
            subgroups: features.contains(::wgpu::Features::SUBGROUP),
            timestamps: features.contains(::wgpu::Features::TIMESTAMP_QUERY),
            reports_f16: available.contains(::wgpu::Features::SHADER_F16),
            tensor_cores,
            info,
            uncaptured,
        })
    }

    /// Whether `matmul_coop.wgsl` can run: cooperative matrices with f16 inputs and f32
    /// accumulation in 16×16×16 blocks, f16 arithmetic, and subgroups of exactly 32 (the kernel
    /// splits its workgroup into 8 subgroups).
    fn supports_tensor_core_matmul(adapter: &::wgpu::Adapter, info: &::wgpu::AdapterInfo) -> bool {
        use ::wgpu::CooperativeScalarType::{F16, F32};
        adapter.features().contains(TENSOR_CORE_FEATURES)
            && info.subgroup_min_size == 32
            && info.subgroup_max_size == 32
            && adapter
                .cooperative_matrix_properties()
                .iter()
                .any(|c| (c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type) == (16, 16, 16, F16, F32))
    }

    /// Adapter name and backend, for messages.
    pub fn adapter_name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    /// True when the adapter is a real GPU (not a CPU emulation such as lavapipe).
    pub fn is_hardware(&self) -> bool {
        matches!(self.info.device_type, ::wgpu::DeviceType::DiscreteGpu | ::wgpu::DeviceType::IntegratedGpu)
    }

    /// Whether reductions use subgroup operations on this adapter.
    pub fn has_subgroups(&self) -> bool {
        self.subgroups
    }

    /// Whether the adapter reports SHADER_F16. rumus requests it only with cooperative
    /// matrices (the tensor-core matmul); other adapters that report it must work like any other.
    pub fn adapter_reports_f16(&self) -> bool {
        self.reports_f16
    }

    /// Whether the device was opened with SHADER_F16 (only with tensor cores).
    pub fn device_has_f16(&self) -> bool {
        self.device.features().contains(::wgpu::Features::SHADER_F16)
    }

    /// Whether the tensor-core matmul ([`MatmulPrecision::F16TensorCores`]) can run here.
    ///
    /// [`MatmulPrecision::F16TensorCores`]: crate::MatmulPrecision::F16TensorCores
    pub fn has_tensor_cores(&self) -> bool {
        self.tensor_cores
    }

    /// Whether the device can write GPU timestamps (TIMESTAMP_QUERY).
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// The limits the device was opened with (the adapter's own).
    pub fn limits(&self) -> &::wgpu::Limits {
        &self.limits
    }

    /// Takes the pending uncaptured driver error, if any.
    pub(crate) fn take_error(&self) -> Result<()> {
        let mut slot = self.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
        match slot.take() {
            Some(message) => Err(Error::Gpu(format!("driver reported: {message}"))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::wgpu::Backends;

    const ALL: Backends = Backends::VULKAN.union(Backends::METAL).union(Backends::DX12).union(Backends::GL);

    fn adapter(name: &str, bus: &str) -> ::wgpu::AdapterInfo {
        ::wgpu::AdapterInfo {
            name: name.into(),
            vendor: 0x10de,
            device: 0,
            device_type: ::wgpu::DeviceType::DiscreteGpu,
            device_pci_bus_id: bus.into(),
            driver: String::new(),
            driver_info: String::new(),
            backend: ::wgpu::Backend::Vulkan,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
            transient_saves_memory: None,
            limit_bucket: None,
        }
    }

    #[test]
    fn an_adapter_is_named_by_index_or_pci_bus_id_and_a_wrong_name_lists_them() {
        let infos = [adapter("gpu0", "0000:3b:00.0"), adapter("gpu1", "0000:86:00.0"), adapter("llvmpipe", "")];
        assert_eq!(adapter_index("1", &infos), Ok(1));
        assert_eq!(adapter_index("0000:86:00.0", &infos), Ok(1));
        assert_eq!(adapter_index("3B:00.0", &infos), Ok(0));
        for wrong in ["3", "0000:00:00.0", "first"] {
            let err = adapter_index(wrong, &infos).unwrap_err();
            assert!(err.contains(&format!("{wrong:?}")) && err.contains("1: gpu1"), "{err}");
        }
    }

    #[test]
    fn unset_or_empty_tries_vulkan_metal_and_dx12() {
        for forced in [None, Some(""), Some("  ")] {
            assert_eq!(choose_backends(forced, ALL), Ok(Backends::VULKAN | Backends::METAL | Backends::DX12));
        }
    }

    #[test]
    fn each_name_forces_its_api_whatever_the_case() {
        assert_eq!(choose_backends(Some("vulkan"), ALL), Ok(Backends::VULKAN));
        assert_eq!(choose_backends(Some("Metal"), ALL), Ok(Backends::METAL));
        assert_eq!(choose_backends(Some(" DX12 "), ALL), Ok(Backends::DX12));
        assert_eq!(choose_backends(Some("gl"), ALL), Ok(Backends::GL));
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_valid_ones() {
        for bad in ["vk", "opengl", "cuda", "vulkan,metal"] {
            let err = choose_backends(Some(bad), ALL).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")) && err.contains("vulkan, metal, dx12, gl"), "{err}");
        }
    }

    #[test]
    fn an_api_missing_from_the_build_is_an_error_naming_those_present() {
        let err = choose_backends(Some("metal"), Backends::VULKAN | Backends::GL).unwrap_err();
        assert!(err.contains("no metal backend") && err.contains("it has: vulkan, gl"), "{err}");
    }

    /// wgpu compiles Metal and DX12 only where they exist, so enabling them costs Linux nothing.
    #[test]
    #[cfg(target_os = "linux")]
    fn this_linux_build_has_vulkan_but_neither_metal_nor_dx12() {
        let compiled = ::wgpu::Instance::enabled_backend_features();
        assert!(compiled.contains(Backends::VULKAN));
        assert!(!compiled.intersects(Backends::METAL | Backends::DX12));
    }
}
