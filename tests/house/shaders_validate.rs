//! Parses, validates and translates to SPIR-V every kernel with naga, exactly as the wgpu
//! backend composes it (the reduction prelude for its adapter kind and the `rumus/shaders/lib/` files
//! it includes), so a broken kernel fails CI without a GPU. Kernels are validated for adapters with subgroups and, with
//! the shared-memory prelude, without the subgroup capability. Every `.wgsl` file in `rumus/shaders/`
//! must be part of some kernel, so none escapes validation. Each kernel's uniform `struct Params`
//! must match, field for field and offset for offset, the Rust struct it is launched with.

use std::path::Path;

use naga::valid::{Capabilities, ValidationFlags, Validator};
use rumus::backend::wgpu::{compiled_sources, kernel_parameters};

/// Parses, validates and translates to SPIR-V (what wgpu does on Vulkan; naga's writer has
/// failed on valid modules before, e.g. on expressions used only inside `coopStore`).
fn validate(name: &str, source: &str, caps: Capabilities) -> Result<usize, String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{name}: parse error:\n{}", e.emit_to_string(source)))?;
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{name}: validation error:\n{}", e.emit_to_string(source)))?;
    let spirv = std::panic::catch_unwind(|| {
        naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
    });
    match spirv {
        Ok(Ok(_)) => Ok(module.entry_points.len()),
        Ok(Err(e)) => Err(format!("{name}: SPIR-V translation failed: {e}")),
        Err(_) => Err(format!("{name}: naga's SPIR-V writer panicked")),
    }
}

/// The `.wgsl` files under `dir`, recursively, with their contents.
fn wgsl_files(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("readable shaders/ entry").path();
        if path.is_dir() {
            files.extend(wgsl_files(&path));
        } else if path.extension().is_some_and(|e| e == "wgsl") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            files.push((path.display().to_string(), text));
        }
    }
    files
}

#[test]
fn every_shader_parses_and_validates() {
    let no_subgroups = Capabilities::all()
        - Capabilities::SUBGROUP
        - Capabilities::SUBGROUP_BARRIER
        - Capabilities::SUBGROUP_VERTEX_STAGE;
    let mut failures = Vec::new();
    let mut checked = Vec::new();
    for (subgroups, caps) in [(true, Capabilities::all()), (false, no_subgroups)] {
        let kernels = compiled_sources(subgroups);
        assert!(kernels.len() >= 18, "expected every kernel family, found {}", kernels.len());
        for (name, source) in kernels {
            let label = format!("{name}.wgsl ({})", if subgroups { "subgroups" } else { "no subgroups" });
            match validate(&label, &source, caps) {
                Ok(0) => failures.push(format!("{label}: no entry point")),
                Ok(_) => {}
                Err(e) => failures.push(e),
            }
            checked.push(source);
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/shaders");
    for (path, text) in wgsl_files(&dir) {
        if !checked.iter().any(|source| source.contains(&text)) {
            failures.push(format!("{path} is in no kernel the backend compiles, so it was not validated"));
        }
    }
    assert!(failures.is_empty(), "{} shader checks failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// The `(name, byte offset)` of each member of the uniform `struct Params` in `source`, and the
/// struct's size.
fn wgsl_params(source: &str) -> (Vec<(String, usize)>, usize) {
    let module = naga::front::wgsl::parse_str(source).expect("parses");
    let params = module.types.iter().find_map(|(_, ty)| match (&ty.name, &ty.inner) {
        (Some(name), naga::TypeInner::Struct { members, span }) if name == "Params" => Some((members, *span)),
        _ => None,
    });
    let (members, span) = params.expect("a struct Params");
    let fields = members.iter().map(|m| (m.name.clone().unwrap_or_default(), m.offset as usize)).collect();
    (fields, span as usize)
}

#[test]
fn every_kernel_is_launched_with_its_params_struct() {
    let sources = compiled_sources(false);
    let mut failures = Vec::new();
    for (name, layout) in kernel_parameters() {
        let source = &sources.iter().find(|(n, _)| *n == name).expect("every kernel has a source").1;
        let (wgsl, span) = wgsl_params(source);
        let rust: Vec<(String, usize)> = layout.fields.iter().map(|&(f, o)| (f.to_string(), o)).collect();
        if wgsl != rust {
            failures.push(format!("{name}.wgsl: WGSL Params {wgsl:?}, Rust {} {rust:?}", layout.name));
        }
        if layout.size < span || layout.size % 16 != 0 {
            failures.push(format!("{name}.wgsl: {} is {} bytes for a WGSL struct of {span}", layout.name, layout.size));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
