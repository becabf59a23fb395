//! Parses, validates and translates to SPIR-V every kernel with naga, exactly as the wgpu
//! backend composes it (the reduction prelude for its adapter kind and the `rumus/shaders/lib/` files
//! it includes), so a broken kernel fails CI without a GPU. Kernels are validated for adapters with subgroups and, with
//! the shared-memory prelude, without the subgroup capability. Every `.wgsl` file in `rumus/shaders/`
//! must be part of some kernel, so none escapes validation. Each kernel's uniform `struct Params`
//! must match, field for field and offset for offset, the Rust struct it is launched with.
//! Every entry point fits WebGPU's default limits or is a large-tile kernel that the backend's
//! own selection keeps off adapters without the limits it needs (with a fallback that fits).

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

/// What one entry point asks of the adapter, in the terms of `wgpu::Limits`.
#[derive(Debug)]
struct Needs {
    kernel: String,
    entry: String,
    workgroup_size: [u32; 3],
    /// Bytes of its `var<workgroup>` variables (naga's layout), counting only those it uses.
    workgroup_bytes: u32,
    /// Storage buffers of the module: the backend's bind group layout declares every one.
    storage_buffers: u32,
    uniform_buffers: u32,
}

impl Needs {
    /// The limits of `limits` this entry point exceeds, in words.
    fn exceeds(&self, limits: &wgpu::Limits) -> Vec<String> {
        let [x, y, z] = self.workgroup_size;
        let checks = [
            ("workgroup size x", x, limits.max_compute_workgroup_size_x),
            ("workgroup size y", y, limits.max_compute_workgroup_size_y),
            ("workgroup size z", z, limits.max_compute_workgroup_size_z),
            ("invocations per workgroup", x * y * z, limits.max_compute_invocations_per_workgroup),
            ("workgroup storage bytes", self.workgroup_bytes, limits.max_compute_workgroup_storage_size),
            ("storage buffers per stage", self.storage_buffers, limits.max_storage_buffers_per_shader_stage),
            ("uniform buffers per stage", self.uniform_buffers, limits.max_uniform_buffers_per_shader_stage),
        ];
        checks
            .iter()
            .filter(|(_, need, have)| need > have)
            .map(|(what, need, have)| format!("{what} {need} > {have}"))
            .collect()
    }
}

/// Every entry point of every kernel as compiled (with and without subgroups), with its needs.
fn kernel_needs() -> Vec<Needs> {
    let mut all = Vec::new();
    for subgroups in [true, false] {
        for (name, source) in compiled_sources(subgroups) {
            let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{name}: {e}"));
            let info = Validator::new(ValidationFlags::all(), Capabilities::all())
                .validate(&module)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).expect("naga lays out every type");
            let count = |space: fn(&naga::AddressSpace) -> bool| {
                module.global_variables.iter().filter(|(_, v)| space(&v.space)).count() as u32
            };
            let storage_buffers = count(|s| matches!(s, naga::AddressSpace::Storage { .. }));
            let uniform_buffers = count(|s| matches!(s, naga::AddressSpace::Uniform));
            for (i, entry) in module.entry_points.iter().enumerate() {
                let uses = info.get_entry_point(i);
                let workgroup_bytes = module
                    .global_variables
                    .iter()
                    .filter(|&(handle, var)| var.space == naga::AddressSpace::WorkGroup && !uses[handle].is_empty())
                    .map(|(_, var)| layouter[var.ty].size)
                    .sum();
                all.push(Needs {
                    kernel: name.to_string(),
                    entry: entry.name.clone(),
                    workgroup_size: entry.workgroup_size,
                    workgroup_bytes,
                    storage_buffers,
                    uniform_buffers,
                });
            }
        }
    }
    all
}

/// The kernels that exceed WebGPU's default limits, as (file, entry point, the gate that keeps
/// them off an adapter without the limits they need). Each gate is exercised below.
const GATED: &[(&str, &str, &str)] = &[
    ("matmul_vec4", "matmul_large", "matmul.rs `fit_under`: the vec4 large tiles need 48 KiB and 512 invocations"),
    ("matmul_vec4", "matmul_tall", "matmul.rs `fit_under`: the vec4 large tiles need 48 KiB and 512 invocations"),
    ("matmul_coop_kn", "matmul_large", COOP_GATE),
    ("matmul_coop_kk", "matmul_large", COOP_GATE),
    ("matmul_coop_mn", "matmul_large", COOP_GATE),
    ("matmul_coop_mk", "matmul_large", COOP_GATE),
    ("conv2d_coop_forward", "conv2d_coop", COOP_GATE),
    ("conv2d_coop_weight_grad", "conv2d_coop", COOP_GATE),
    ("conv2d", "conv2d_forward_large", "conv2d.rs `choose_tiles`: the large tiles need 17 KiB"),
    ("conv2d", "conv2d_input_grad_large", "conv2d.rs `choose_tiles`: the large tiles need 17 KiB"),
    ("attention_backward_dkdv_blocked_d32", "attention_backward_dkdv", "attention.rs `dkdv_kernel`"),
    ("attention_backward_dkdv_blocked_d64", "attention_backward_dkdv", "attention.rs `dkdv_kernel`"),
    ("optimizer_sgd_8", "optimizer", OPTIMIZER_GATE),
    ("optimizer_sgd_16", "optimizer", OPTIMIZER_GATE),
    ("optimizer_sgd_momentum_4", "optimizer", OPTIMIZER_GATE),
    ("optimizer_sgd_momentum_8", "optimizer", OPTIMIZER_GATE),
    ("optimizer_sgd_momentum_16", "optimizer", OPTIMIZER_GATE),
    ("optimizer_adam_4", "optimizer", OPTIMIZER_GATE),
    ("optimizer_adam_8", "optimizer", OPTIMIZER_GATE),
    ("optimizer_adam_16", "optimizer", OPTIMIZER_GATE),
    ("optimizer_rmsprop_4", "optimizer", OPTIMIZER_GATE),
    ("optimizer_rmsprop_8", "optimizer", OPTIMIZER_GATE),
    ("optimizer_rmsprop_16", "optimizer", OPTIMIZER_GATE),
];

/// The gate of the optimizer's many-parameter modules.
const OPTIMIZER_GATE: &str = "optimizer.rs `slots_under`: as many parameters as the adapter binds the buffers of";

/// The gate of the tensor-core kernels.
const COOP_GATE: &str = "coop_tiles.rs `fits`: set_matmul_precision refuses tensor cores";

/// Every kernel fits WebGPU's default limits (`wgpu::Limits::default()`: 16 KiB of workgroup
/// storage, 256 invocations, workgroup sizes 256 x 256 x 64, 8 storage buffers per stage, ...) or
/// is one of the large-tile kernels in [`GATED`]; the backend's own selection then refuses each of
/// those under the default limits, picks a kernel that fits them instead, and still picks the large
/// one where an adapter offers what it needs.
#[test]
fn every_kernel_fits_webgpu_default_limits_or_is_gated() {
    use rumus::backend::wgpu::{conv2d_kernels_under_limits, kernel_under_limits};
    use rumus::backend::{Conv2dArgs, ConvGeom, MatmulArgs, MatrixLayout};

    let defaults = wgpu::Limits::default();
    let needs = kernel_needs();
    let mut failures = Vec::new();
    for n in &needs {
        let over = n.exceeds(&defaults);
        let gated = GATED.iter().any(|&(k, e, _)| k == n.kernel && e == n.entry);
        if !over.is_empty() && !gated {
            failures.push(format!(
                "{}::{} exceeds WebGPU's defaults ({}) and no gate keeps it off such adapters",
                n.kernel,
                n.entry,
                over.join(", ")
            ));
        }
        if over.is_empty() && gated {
            failures.push(format!("{}::{} fits WebGPU's defaults: drop it from GATED", n.kernel, n.entry));
        }
    }
    for &(kernel, entry, _) in GATED {
        if !needs.iter().any(|n| n.kernel == kernel && n.entry == entry) {
            failures.push(format!("GATED names {kernel}::{entry}, which the backend does not compile"));
        }
    }
    let fits = |kernel: &str, entry: &str| {
        let found: Vec<&Needs> = needs.iter().filter(|n| n.kernel == kernel && n.entry == entry).collect();
        !found.is_empty() && found.iter().all(|n| n.exceeds(&defaults).is_empty())
    };

    // An adapter with what every large kernel needs (an H100's limits are larger still).
    let large = wgpu::Limits {
        max_compute_workgroup_storage_size: 48 << 10,
        max_compute_invocations_per_workgroup: 1024,
        max_compute_workgroup_size_x: 1024,
        max_compute_workgroup_size_y: 1024,
        ..defaults.clone()
    };
    let product = |m: usize, k: usize, n: usize| MatmulArgs {
        batch: 1,
        m,
        k,
        n,
        lhs: MatrixLayout::row_major(m, k),
        rhs: MatrixLayout::row_major(k, n),
    };
    // A square product (large tiles) and a transformer weight gradient (split-K on large tiles).
    for (what, args) in
        [("4096^3", product(4096, 4096, 4096)), ("[1152, 16384] @ [16384, 384]", product(1152, 16384, 384))]
    {
        let (kernel, entry) = kernel_under_limits(&defaults, &args, 64).matmul;
        if !fits(kernel, entry) {
            failures
                .push(format!("matmul {what} under WebGPU's defaults runs {kernel}::{entry}, which does not fit them"));
        }
        let (kernel, entry) = kernel_under_limits(&large, &args, 64).matmul;
        if kernel != "matmul_vec4" || !["matmul_large", "matmul_tall"].contains(&entry) {
            failures.push(format!("matmul {what} with 48 KiB and 1024 invocations runs {kernel}::{entry}, not a vec4 large tile: the gate no longer decides"));
        }
    }
    for d in [32, 64, 128] {
        let small = product(64, 64, 64);
        let kernel = kernel_under_limits(&defaults, &small, d).attention_dkdv.expect("head dimensions up to 128");
        if !fits(kernel, "attention_backward_dkdv") {
            failures.push(format!(
                "attention dk/dv for d = {d} under WebGPU's defaults runs {kernel}, which does not fit them"
            ));
        }
        let kernel = kernel_under_limits(&large, &small, d).attention_dkdv.expect("head dimensions up to 128");
        if d <= 64 && !kernel.starts_with("attention_backward_dkdv_blocked") {
            failures.push(format!("attention dk/dv for d = {d} with 48 KiB runs {kernel}, not the blocked kernel: the gate no longer decides"));
        }
    }
    // ResNet-18's 3×3 convolutions at batch 128: the tiles each stage's forward, input gradient
    // and weight gradient take where the large tiles fit (64 channels keep the 64-row tiles, and
    // the weight gradient always runs on them, faster there on an H100; 512 channels at 4×4 have
    // too few 128×128 tiles for the unsplit passes).
    let stage = |channels: usize, side: usize| Conv2dArgs {
        geom: ConvGeom::square(128, channels, (side, side), 3, 1, 1, 1).expect("a valid geometry"),
        out_channels: channels,
        groups: 1,
    };
    let stages = [
        (64, 32, ["", "", ""]),
        (128, 16, ["_large", "_large", ""]),
        (256, 8, ["_large", "_large", ""]),
        (512, 4, ["", "", ""]),
    ];
    for (channels, side, want) in stages {
        let conv = stage(channels, side);
        for (kernel, entry) in conv2d_kernels_under_limits(&defaults, &conv) {
            if !fits(kernel, entry) {
                failures
                    .push(format!("conv2d under WebGPU's defaults runs {kernel}::{entry}, which does not fit them"));
            }
        }
        let got = conv2d_kernels_under_limits(&large, &conv).map(|(_, e)| e);
        let pass = ["conv2d_forward", "conv2d_input_grad", "conv2d_weight_grad"];
        if (0..3).any(|i| got[i] != format!("{}{}", pass[i], want[i])) {
            failures.push(format!("conv2d of {channels} channels at {side}x{side} with 48 KiB runs {got:?}, expected the tiles {want:?}: the gate or the choice changed"));
        }
        // Each pass's gate asks for no more than its large kernel needs: it opens at exactly that.
        for (i, entry) in got.into_iter().enumerate() {
            if !entry.ends_with("_large") {
                continue;
            }
            let need = needs
                .iter()
                .filter(|n| n.kernel == "conv2d" && n.entry == entry)
                .map(|n| n.workgroup_bytes)
                .max()
                .expect("the chosen entry is compiled");
            let limits = |have: u32| wgpu::Limits { max_compute_workgroup_storage_size: have, ..large.clone() };
            if conv2d_kernels_under_limits(&limits(need), &conv)[i].1 != entry {
                failures.push(format!("conv2d of {channels} channels at {side}x{side}: {need} bytes of workgroup storage, all that {entry} needs, do not open its gate"));
            }
            if conv2d_kernels_under_limits(&limits(need - 1), &conv)[i].1 == entry {
                failures.push(format!("conv2d of {channels} channels at {side}x{side} runs {entry} with {} bytes of workgroup storage (it needs {need})", need - 1));
            }
        }
    }
    let small = product(64, 64, 64);
    for (kernel, many) in kernel_under_limits(&defaults, &small, 64).optimizer.into_iter().zip(
        kernel_under_limits(&wgpu::Limits { max_storage_buffers_per_shader_stage: 64, ..large.clone() }, &small, 64)
            .optimizer,
    ) {
        if !fits(kernel, "optimizer") {
            failures.push(format!("the optimizer under WebGPU's defaults runs {kernel}, which does not fit them"));
        }
        if !many.ends_with("_16") {
            failures.push(format!("the optimizer with 64 storage buffers runs {many}, not 16 parameters a dispatch"));
        }
    }
    if kernel_under_limits(&defaults, &small, 64).tensor_cores.is_ok() {
        failures.push("tensor cores are allowed under WebGPU's default 16 KiB of workgroup storage".into());
    }
    if let Err(e) = kernel_under_limits(&large, &small, 64).tensor_cores {
        failures.push(format!("tensor cores refused with 48 KiB of workgroup storage: {e}"));
    }
    failures.sort();
    failures.dedup(); // a kernel compiled with and without subgroups fails alike
    assert!(failures.is_empty(), "{} limit checks failed:\n{}", failures.len(), failures.join("\n"));
}
