//! Every kernel, exactly as the wgpu backend compiles it (`compiled_sources`: the reduction
//! prelude for the adapter kind and the `shaders/lib/` includes in place), translates with naga
//! to each shading language wgpu may hand it to: SPIR-V (Vulkan), MSL (Metal) and HLSL (DX12).
//! A kernel that cannot reach one of them is listed in [`EXCEPTIONS`] with the reason, and the
//! test checks that it fails there for that reason only.

use std::collections::BTreeMap;

use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::{AddressSpace, Module, StorageAccess};
use rumus::backend::wgpu::compiled_sources;

/// The languages a kernel is translated to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Spirv,
    Msl,
    Hlsl,
}

const TARGETS: [Target; 3] = [Target::Spirv, Target::Msl, Target::Hlsl];

/// A kernel that cannot translate to a language: (file name, language, why, a piece of the
/// error naga must give, so that any other failure of that kernel still fails the test).
const EXCEPTIONS: &[(&str, Target, &str, &str)] = &[
    ("matmul_coop_kn", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
    ("matmul_coop_kk", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
    ("matmul_coop_mn", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
    ("matmul_coop_mk", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
    ("conv2d_coop_forward", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
    ("conv2d_coop_weight_grad", Target::Hlsl, NO_HLSL_COOP, HLSL_COOP_ERROR),
];

/// Why the tensor-core kernels have no HLSL, and the error that says so.
const NO_HLSL_COOP: &str = "naga's HLSL writer has no cooperative-matrix types (wgpu's DX12 backend offers no \
     EXPERIMENTAL_COOPERATIVE_MATRIX, so the tensor-core kernels are never compiled there: \
     MatmulPrecision::F16TensorCores is an error on DX12 as on any adapter without it)";
const HLSL_COOP_ERROR: &str = "write_value_type CooperativeMatrix";

/// Metal Shading Language 2.4 (macOS 12): subgroup (SIMD-group) operations need 2.1.
const MSL_VERSION: (u8, u8) = (2, 4);

/// What the kernel is parsed and validated into, once for every language.
struct Compiled {
    module: Module,
    info: ModuleInfo,
}

fn compile(label: &str, source: &str) -> Result<Compiled, String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{label}: parse error:\n{}", e.emit_to_string(source)))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| format!("{label}: validation error:\n{}", e.emit_to_string(source)))?;
    Ok(Compiled { module, info })
}

/// The `(group, binding)` of every resource, with whether the kernel may write it.
fn resources(module: &Module) -> Vec<(naga::ResourceBinding, bool)> {
    module
        .global_variables
        .iter()
        .filter_map(|(_, var)| {
            let writable =
                matches!(var.space, AddressSpace::Storage { access } if access.contains(StorageAccess::STORE));
            var.binding.map(|b| (b, writable))
        })
        .collect()
}

fn spirv(c: &Compiled) -> Result<(), String> {
    naga::back::spv::write_vec(&c.module, &c.info, &naga::back::spv::Options::default(), None)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// As wgpu's Metal backend does: one buffer slot per resource, in order, and a sizes buffer
/// after them for `arrayLength`; a missing binding is an error, not faked.
fn msl(c: &Compiled) -> Result<(), String> {
    use naga::back::msl::{BindTarget, EntryPointResources, Options, PipelineOptions};
    let bound = resources(&c.module);
    let map: BTreeMap<_, _> = bound
        .iter()
        .enumerate()
        .map(|(slot, &(binding, mutable))| {
            (binding, BindTarget { buffer: Some(slot as u8), mutable, ..Default::default() })
        })
        .collect();
    let per_entry =
        EntryPointResources { resources: map, immediates_buffer: None, sizes_buffer: Some(bound.len() as u8) };
    let options = Options {
        lang_version: MSL_VERSION,
        fake_missing_bindings: false,
        per_entry_point_map: c.module.entry_points.iter().map(|ep| (ep.name.clone(), per_entry.clone())).collect(),
        ..Options::default()
    };
    naga::back::msl::write_string(&c.module, &c.info, &options, &PipelineOptions::default())
        .map(drop)
        .map_err(|e| e.to_string())
}

/// As wgpu's DX12 backend does: register `binding` in space `group`; shader model 6.0 (wave
/// operations) for kernels with subgroups, 5.1 (FXC) without.
fn hlsl(c: &Compiled, subgroups: bool) -> Result<(), String> {
    use naga::back::hlsl::{BindTarget, Options, PipelineOptions, ShaderModel, Writer};
    let binding_map = resources(&c.module)
        .into_iter()
        .map(|(b, _)| (b, BindTarget { space: b.group as u8, register: b.binding, ..Default::default() }))
        .collect();
    let options = Options {
        shader_model: if subgroups { ShaderModel::V6_0 } else { ShaderModel::V5_1 },
        binding_map,
        fake_missing_bindings: false,
        ..Options::default()
    };
    let mut out = String::new();
    Writer::new(&mut out, &options, &PipelineOptions::default())
        .write(&c.module, &c.info, None)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Translates, turning a panic of naga's writer into an error.
fn translate(c: &Compiled, target: Target, subgroups: bool) -> Result<(), String> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match target {
        Target::Spirv => spirv(c),
        Target::Msl => msl(c),
        Target::Hlsl => hlsl(c, subgroups),
    }));
    result.unwrap_or_else(|_| Err(format!("naga's {target:?} writer panicked")))
}

#[test]
fn every_kernel_translates_to_spirv_msl_and_hlsl() {
    let mut failures = Vec::new();
    let mut translated = 0;
    for subgroups in [true, false] {
        let kernels = compiled_sources(subgroups);
        assert!(kernels.len() >= 18, "expected every kernel family, found {}", kernels.len());
        for (name, source) in kernels {
            let label = format!("{name}.wgsl ({})", if subgroups { "subgroups" } else { "no subgroups" });
            let compiled = match compile(&label, &source) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            for target in TARGETS {
                let exception = EXCEPTIONS.iter().find(|(n, t, ..)| *n == name && *t == target);
                match (translate(&compiled, target, subgroups), exception) {
                    (Ok(()), None) => translated += 1,
                    (Ok(()), Some((_, _, why, _))) => {
                        failures.push(format!("{label} now translates to {target:?}: drop its exception ({why})"))
                    }
                    (Err(e), None) => failures.push(format!("{label} -> {target:?}: {e}")),
                    (Err(e), Some((_, _, why, expected))) if !e.contains(expected) => failures.push(format!(
                        "{label} -> {target:?} fails, but not for its listed reason ({why}; expected {expected:?}): {e}"
                    )),
                    (Err(_), Some(_)) => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} translations failed:\n{}", failures.len(), failures.join("\n\n"));
    assert!(translated >= 2 * 18 * 3 - 2 * EXCEPTIONS.len(), "only {translated} translations succeeded");
}

#[test]
fn every_exception_names_a_kernel_the_backend_compiles() {
    let names: Vec<&str> = compiled_sources(true).into_iter().map(|(n, _)| n).collect();
    for (name, target, ..) in EXCEPTIONS {
        assert!(names.contains(name), "exception for {name} ({target:?}) names no kernel");
    }
}
