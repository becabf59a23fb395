//! What the GPU driver compiled each kernel into: registers per invocation, shared memory and
//! binary size, from `VK_KHR_pipeline_executable_properties` (NVIDIA reports these; Mesa's
//! lavapipe of Debian 12 does not have the extension). Registers decide how many workgroups an
//! SM holds at once, which no timing shows directly.
//!
//! ```text
//! cargo run --release -p rumus-tools --bin kernel_stats                  # every kernel the backend compiles
//! cargo run --release -p rumus-tools --bin kernel_stats -- a.wgsl b.wgsl # these files (e.g. lab variants)
//! cargo run --release -p rumus-tools --bin kernel_stats -- --checked       # with wgpu's runtime checks
//! cargo run --release -p rumus-tools --bin kernel_stats -- --dump DIR a.wgsl # also the driver's binaries
//! ```
//!
//! `--dump DIR` writes, per entry point, what the driver puts in a pipeline cache
//! (`FILE.ENTRY.cache`): on NVIDIA that holds the compiled machine code, which `tools/bench/sass.py`
//! finds and hands to `nvdisasm`, so the instructions a WGSL kernel became can be read (the
//! driver reports no internal representations through the extension).
//!
//! Kernels are translated by naga as wgpu does for the matmul shaders' trusted modules (no
//! bounds checks, no loop-bound counters), or with `--checked` as it does for the others
//! (indices clamped, loops bounded; buffers left to the driver's robust access), then compiled by
//! the driver with statistics capture, outside wgpu. Each line also gives the driver's compile
//! time, which is what a cold start waits for.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use ash::vk;

type Error = Box<dyn std::error::Error>;

/// The SPIR-V of one entry point, with or without wgpu's runtime checks, and its buffer
/// bindings in group 0.
fn translate(source: &str, entry: &str, checked: bool) -> Result<(Vec<u32>, Vec<vk::DescriptorType>), Error> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
    let index = if checked { naga::proc::BoundsCheckPolicy::Restrict } else { unchecked };
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index,
            buffer: unchecked,
            image_load: unchecked,
            binding_array: unchecked,
        },
        force_loop_bounding: checked,
        flags: naga::back::spv::WriterFlags::empty(),
        // wgpu leaves zeroing workgroup memory to drivers of Vulkan 1.3 (NVIDIA's among them);
        // naga's polyfill would add a store loop the real kernels do not have.
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::Native,
        ..Default::default()
    };
    let pipeline =
        naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.into() };
    let spirv = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))?;
    let mut bindings = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else { continue };
        let ty = match var.space {
            naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            _ => vk::DescriptorType::STORAGE_BUFFER,
        };
        let slot = binding.binding as usize;
        if bindings.len() <= slot {
            bindings.resize(slot + 1, vk::DescriptorType::STORAGE_BUFFER);
        }
        bindings[slot] = ty;
    }
    Ok((spirv, bindings))
}

struct Driver {
    device: ash::Device,
    executables: ash::khr::pipeline_executable_properties::Device,
}

impl Driver {
    fn open() -> Result<Driver, Error> {
        // SAFETY: loading the system Vulkan loader; nothing else is using it in this process.
        let entry = unsafe { ash::Entry::load()? };
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let instance =
            unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)? };
        let gpus = unsafe { instance.enumerate_physical_devices()? };
        let discrete = |&&g: &&vk::PhysicalDevice| {
            unsafe { instance.get_physical_device_properties(g) }.device_type == vk::PhysicalDeviceType::DISCRETE_GPU
        };
        let gpu = *gpus.iter().find(discrete).or(gpus.first()).ok_or("no Vulkan device")?;
        let props = unsafe { instance.get_physical_device_properties(gpu) };
        println!("device: {}", props.device_name_as_c_str()?.to_string_lossy());
        let extensions = unsafe { instance.enumerate_device_extension_properties(gpu)? };
        let has = |name: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
        if !has(ash::khr::pipeline_executable_properties::NAME) {
            return Err("the driver has no VK_KHR_pipeline_executable_properties".into());
        }
        let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
        let coop = has(ash::khr::cooperative_matrix::NAME);
        if coop {
            names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
        }
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&[1.0])];
        let mut statistics =
            vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
        let mut cooperative = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
        let mut f16 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(true).vulkan_memory_model(true);
        let mut zeroed = vk::PhysicalDeviceVulkan13Features::default().shader_zero_initialize_workgroup_memory(true);
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&names)
            .push_next(&mut statistics)
            .push_next(&mut f16)
            .push_next(&mut zeroed);
        if coop {
            info = info.push_next(&mut cooperative);
        }
        let device = unsafe { instance.create_device(gpu, &info, None)? };
        let executables = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        Ok(Driver { device, executables })
    }

    /// The driver's statistics of `entry` in `source`, as "name=value" pairs, the compile time
    /// first; with `dump`, the pipeline cache is written to that file.
    fn statistics(&self, source: &str, entry: &str, checked: bool, dump: Option<&Path>) -> Result<Vec<String>, Error> {
        let (spirv, bindings) = translate(source, entry, checked)?;
        let d = &self.device;
        let layout_bindings: Vec<_> = bindings
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        // SAFETY: plain object creation on a live device; every handle is destroyed below.
        unsafe {
            let module = d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&spirv), None)?;
            let set = d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&layout_bindings),
                None,
            )?;
            let sets = [set];
            let layout = d.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&sets), None)?;
            let name = CString::new(entry)?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&name);
            let create = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)
                .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)];
            let cache = d.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)?;
            let started = std::time::Instant::now();
            let pipeline = d.create_compute_pipelines(cache, &create, None).map_err(|(_, e)| e)?[0];
            let compile_ms = started.elapsed().as_secs_f64() * 1e3;
            let executable = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(0);
            let stats = self.executables.get_pipeline_executable_statistics(&executable)?;
            let pairs = std::iter::once(format!("compile ms={compile_ms:.1}"))
                .chain(stats.iter().map(|s| {
                    let value = match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => s.value.b32.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        _ => s.value.f64.to_string(),
                    };
                    format!("{}={value}", s.name_as_c_str().map(CStr::to_string_lossy).unwrap_or_default())
                }))
                .collect();
            if let Some(file) = dump {
                std::fs::write(file, d.get_pipeline_cache_data(cache)?)?;
            }
            d.destroy_pipeline_cache(cache, None);
            d.destroy_pipeline(pipeline, None);
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(module, None);
            Ok(pairs)
        }
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let checked = args.iter().any(|a| a == "--checked");
    let dump = args.iter().position(|a| a == "--dump").map(|i| args.get(i + 1).cloned().ok_or("--dump needs a folder"));
    let dump = dump.transpose()?.map(PathBuf::from);
    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir)?;
    }
    let files: Vec<String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| *a != "--checked" && *a != "--dump" && (*i == 0 || args[i - 1] != "--dump"))
        .map(|(_, a)| a.clone())
        .collect();
    let kernels: Vec<(String, String)> = if files.is_empty() {
        rumus::backend::wgpu::compiled_sources(true)
            .into_iter()
            .map(|(name, source)| (name.to_string(), source))
            .collect()
    } else {
        files.iter().map(|f| Ok((f.clone(), std::fs::read_to_string(f)?))).collect::<Result<_, Error>>()?
    };
    let driver = Driver::open()?;
    for (name, source) in kernels {
        let module = naga::front::wgsl::parse_str(&source).map_err(|e| e.emit_to_string(&source))?;
        let stem = Path::new(&name).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for entry in &module.entry_points {
            let cache_file = dump.as_ref().map(|dir| dir.join(format!("{stem}.{}.cache", entry.name)));
            match driver.statistics(&source, &entry.name, checked, cache_file.as_deref()) {
                Ok(stats) => println!("{name} {}: {}", entry.name, stats.join("; ")),
                Err(e) => println!("{name} {}: {e}", entry.name),
            }
        }
    }
    Ok(())
}
