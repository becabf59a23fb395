//! Parses and validates every WGSL file in `shaders/` with naga, so a broken kernel fails CI
//! without a GPU. Kernels that call the row-reduction helpers (`wg_sum`, `wg_max`) are validated
//! with both preludes; the shared-memory variant must also pass without the subgroup capability.

use std::path::Path;

use naga::valid::{Capabilities, ValidationFlags, Validator};

const PRELUDE_SUBGROUP: &str = "prelude_reduce_subgroup.wgsl";
const PRELUDE_SHARED: &str = "prelude_reduce_shared.wgsl";

fn validate(name: &str, source: &str, caps: Capabilities) -> Result<usize, String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{name}: parse error:\n{}", e.emit_to_string(source)))?;
    Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{name}: validation error:\n{}", e.emit_to_string(source)))?;
    Ok(module.entry_points.len())
}

#[test]
fn every_shader_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let subgroup_prelude = read(PRELUDE_SUBGROUP);
    let shared_prelude = read(PRELUDE_SHARED);
    let no_subgroups = Capabilities::all()
        - Capabilities::SUBGROUP
        - Capabilities::SUBGROUP_BARRIER
        - Capabilities::SUBGROUP_VERTEX_STAGE;

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("shaders/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wgsl"))
        .collect();
    names.sort();
    assert!(names.len() >= 18, "expected every kernel family in shaders/, found {names:?}");

    let mut failures = Vec::new();
    let mut checked = 0;
    for name in &names {
        let source = read(name);
        if name.starts_with("prelude_") {
            let caps = if name == PRELUDE_SHARED { no_subgroups } else { Capabilities::all() };
            if let Err(e) = validate(name, &source, caps) {
                failures.push(e);
            }
            checked += 1;
            continue;
        }
        let variants: Vec<(String, String, Capabilities)> = if source.contains("wg_sum(") || source.contains("wg_max(")
        {
            vec![
                (format!("{name} + subgroup prelude"), format!("{subgroup_prelude}\n{source}"), Capabilities::all()),
                (format!("{name} + shared prelude"), format!("{shared_prelude}\n{source}"), no_subgroups),
            ]
        } else {
            vec![(name.clone(), source.clone(), no_subgroups)]
        };
        for (label, text, caps) in variants {
            match validate(&label, &text, caps) {
                Ok(0) => failures.push(format!("{label}: no entry point")),
                Ok(_) => {}
                Err(e) => failures.push(e),
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{} of {checked} shader checks failed:\n{}", failures.len(), failures.join("\n\n"));
}
