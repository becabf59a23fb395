//! The layering of docs/ARCHITECTURE.md, checked on the source: bottom to top, error/rng →
//! backend (kernels only) → tensor/autograd → ops (the only callers of `Backend`) → nn/optim →
//! data/io → train/model/distributed.
//!
//! - `nn/`, `optim/`, `data/`, `io/`, `train/`, `distributed/`, `model.rs` and `warmup.rs` never name the
//!   backend: no `crate::backend` path (also inside `use crate::{…}` groups) and no `.backend()`
//!   call. They reach kernels through ops; the plain kernel vocabulary they need (`BinaryOp`,
//!   `DType`, `OptimizerStep`) is re-exported by `ops`. `EXCEPTIONS` lists, with reasons, the
//!   lines that may (the warm-up table's two `use` lines of the backend's warm-up).
//! - `backend/` names nothing above it: of the crate it uses only the modules below it (error,
//!   layout, rng, precision) and never `RawTensor` or `Tensor<…>`. Its unit-test modules (a
//!   `#[cfg(test)] mod …` block) are exempt: they reach a device through `crate::testing`.
//!
//! Code is checked with comments removed (prose may describe the layers around a module).

use std::path::{Path, PathBuf};

/// Layers above `ops`, relative to `rumus/src`.
const ABOVE_OPS: &[&str] = &["nn", "optim", "data", "io", "train", "distributed", "model.rs", "warmup.rs"];

/// What `backend/` may name of the crate (`crate::<this>`): the modules below it and their items.
const BELOW_BACKEND: &[&str] =
    &["backend", "error", "Error", "Result", "layout", "Layout", "rng", "precision", "MatmulPrecision"];

/// Names `backend/` must not use under any path: the tensor types above it.
const TENSOR_TYPES: &[&str] = &["RawTensor", "Tensor<"];

/// The legitimate exceptions, as (file relative to `rumus/src`, the text of the line that may name
/// what the rule forbids, why).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "warmup.rs",
        "use crate::backend::wgpu::warmup::{self as kernel, KernelWork};",
        "the start-up warm-up's table names the backend's kernel works and starts its threads; it calls no kernel itself",
    ),
    ("warmup.rs", "use crate::backend::wgpu::WgpuBackend;", "the backend the warm-up table binds its works to"),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/src")
}

/// Every `.rs` file under `path` (or `path` itself), sorted.
fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            files.extend(rust_files(&entry));
        } else if entry.extension().is_some_and(|x| x == "rs") {
            files.push(entry);
        }
    }
    files
}

/// `source` with `//` and `/* */` comments blanked (newlines kept, so offsets keep their line).
/// String contents are kept; a `//` inside a string blanks the rest of its line, which can only
/// hide text, never invent a name.
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// `code` with each `#[cfg(test)] mod name { … }` block blanked (newlines kept).
fn strip_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|i| from + i) {
        let after = at + "#[cfg(test)]".len();
        let rest = out[after..].trim_start();
        from = after;
        // A test module may be visible to its siblings' tests (`pub(crate) mod tests`).
        let rest = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|v| rest.strip_prefix(v)).unwrap_or(rest);
        if !rest.starts_with("mod ") {
            continue;
        }
        let Some(open) = out[after..].find('{').map(|i| after + i) else { break };
        let mut depth = 0usize;
        let mut end = out.len();
        for (i, c) in out[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let blank: String = out[at..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        out.replace_range(at..end, &blank);
        from = end;
    }
    out
}

/// The first path segments named after `crate::` in `code`, with their byte offsets: `crate::nn::X`
/// gives `nn`; `use crate::{backend::{A, B}, Error}` gives `backend` and `Error`.
fn crate_names(code: &str) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::").map(|i| from + i) {
        let start = at + "crate::".len();
        from = start;
        // `rumus_crate::x` or `foo_crate::x` are other paths.
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[start..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1usize;
            let mut segment_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 && segment_start && (c.is_alphanumeric() || c == '_') {
                    let name: String = group[i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    names.push((start + 1 + i, name));
                    segment_start = false;
                }
                if depth == 1 && c == ',' {
                    segment_start = true;
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            names.push((at, name));
        }
    }
    names
}

fn line_of(code: &str, offset: usize) -> usize {
    code[..offset.min(code.len())].matches('\n').count() + 1
}

fn relative(file: &Path) -> String {
    file.strip_prefix(src()).unwrap_or(file).display().to_string()
}

/// Whether line `line` (1-based) of `code` in `file` is a listed exception.
fn excepted(file: &str, code: &str, line: usize) -> bool {
    let text = code.lines().nth(line - 1).unwrap_or("").trim();
    EXCEPTIONS.iter().any(|&(f, allowed, _)| f == file && text == allowed)
}

/// Violations of the rule for layers above `ops` in `code` (comments already stripped).
fn backend_uses(code: &str) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = crate_names(code)
        .into_iter()
        .filter(|(_, name)| name == "backend")
        .map(|(at, _)| (line_of(code, at), "crate::backend".to_string()))
        .collect();
    found.extend(code.match_indices(".backend()").map(|(at, _)| (line_of(code, at), ".backend()".to_string())));
    found.sort();
    found
}

/// Violations of the rule for `backend/` in `code` (comments and test modules already stripped).
fn uses_above_backend(code: &str) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = crate_names(code)
        .into_iter()
        .filter(|(_, name)| !BELOW_BACKEND.contains(&name.as_str()))
        .map(|(at, name)| (line_of(code, at), format!("crate::{name}")))
        .collect();
    for ty in TENSOR_TYPES {
        found.extend(code.match_indices(ty).map(|(at, _)| (line_of(code, at), ty.to_string())));
    }
    found.sort();
    found
}

fn report(violations: Vec<String>, rule: &str) {
    assert!(violations.is_empty(), "{rule}:\n{}", violations.join("\n"));
}

#[test]
fn layers_above_ops_never_name_the_backend() {
    let mut violations = Vec::new();
    for layer in ABOVE_OPS {
        for file in rust_files(&src().join(layer)) {
            let code = strip_comments(&std::fs::read_to_string(&file).unwrap());
            let name = relative(&file);
            for (line, what) in backend_uses(&code) {
                if !excepted(&name, &code, line) {
                    violations.push(format!("rumus/src/{name}:{line}: names {what}"));
                }
            }
        }
    }
    report(violations, "only ops/ may call the backend; route these through an op in rumus/src/ops/");
}

#[test]
fn the_backend_names_nothing_above_it() {
    let mut violations = Vec::new();
    for file in rust_files(&src().join("backend")) {
        let code = strip_test_modules(&strip_comments(&std::fs::read_to_string(&file).unwrap()));
        let name = relative(&file);
        for (line, what) in uses_above_backend(&code) {
            if !excepted(&name, &code, line) {
                violations.push(format!("rumus/src/{name}:{line}: names {what}"));
            }
        }
    }
    report(violations, "the backend must know nothing above it (only error, layout, rng, precision)");
}

#[test]
fn every_layer_the_rules_name_exists() {
    for layer in ABOVE_OPS.iter().chain(&["backend", "ops"]) {
        assert!(!rust_files(&src().join(layer)).is_empty(), "rumus/src/{layer} holds no Rust file");
    }
}

#[test]
fn the_checks_find_what_they_look_for() {
    let upper = strip_comments(
        "use crate::{nn::Param,\n backend::IndexArgs};\n// crate::backend in prose\nlet b = t.device().backend();\n",
    );
    assert_eq!(backend_uses(&upper), vec![(2, "crate::backend".to_string()), (4, ".backend()".to_string())]);
    assert!(backend_uses(&strip_comments("use crate::ops::{BinaryOp, DType}; // SVG backend::x\n")).is_empty());

    let backend = "use crate::{rng, Error, Layout};\nuse crate::nn::Linear;\nfn f(t: &RawTensor) {}\n\
                   #[cfg(test)]\nmod tests {\n    use crate::testing::wgpu_or_skip;\n}\n";
    let code = strip_test_modules(&strip_comments(backend));
    assert_eq!(uses_above_backend(&code), vec![(2, "crate::nn".to_string()), (3, "RawTensor".to_string())]);
    let shared = "use crate::Error;\n#[cfg(test)]\npub(crate) mod tests {\n    use crate::testing::assert_close;\n}\n";
    assert!(uses_above_backend(&strip_test_modules(&strip_comments(shared))).is_empty());
    let nested = "use crate::{backend::{A, B}, Device};";
    let names: Vec<String> = crate_names(nested).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["backend", "Device"]);
}

/// Repository-relative paths named in backticks in `doc` (templates with `<…>`, globs and
/// commands left out).
fn named_paths(doc: &str) -> Vec<String> {
    const ROOTS: &[&str] = &["rumus/", "rumus-macros/", "tests/", "docs/", "shaders/", "examples/", "tools/", ".ci/"];
    doc.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| ROOTS.iter().any(|r| span.starts_with(r)))
        .filter(|span| !span.contains(|c: char| c.is_whitespace() || "<>*{}".contains(c)))
        .map(|span| span.trim_end_matches('/').to_string())
        .collect()
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for doc in ["docs/ARCHITECTURE.md", "docs/ENVIRONMENT.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let paths = named_paths(&text);
        assert!(paths.len() > 5 || doc.ends_with("ENVIRONMENT.md"), "{doc} names {paths:?}");
        missing.extend(paths.into_iter().filter(|p| !root.join(p).exists()).map(|p| format!("{doc}: {p}")));
    }
    assert!(missing.is_empty(), "paths named in the docs that do not exist:\n{}", missing.join("\n"));
}

/// Every `RUMUS_[A-Z0-9_]+` name in the text of the files under `dirs`.
fn rumus_variables(root: &Path, dirs: &[&str]) -> std::collections::BTreeMap<String, String> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| root.join(d)).filter(|p| p.exists()).collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for (at, _) in text.match_indices("RUMUS_") {
            let name: String =
                text[at..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
            if name.len() > "RUMUS_".len() {
                found.entry(name).or_insert_with(|| path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found
}

#[test]
fn every_rumus_variable_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ENVIRONMENT.md")).unwrap();
    let dirs = ["rumus/src", "rumus-macros/src", "examples", "tests", ".ci", "tools", "src"];
    let variables = rumus_variables(root, &dirs);
    assert!(variables.contains_key("RUMUS_DEVICE"), "the scan found {variables:?}");
    let missing: Vec<String> = variables
        .iter()
        .filter(|(name, _)| !doc.contains(&format!("`{name}`")))
        .map(|(name, file)| format!("{name} (read in {file})"))
        .collect();
    assert!(missing.is_empty(), "RUMUS_* variables missing from docs/ENVIRONMENT.md:\n{}", missing.join("\n"));
}
