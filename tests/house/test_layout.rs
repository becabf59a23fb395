//! The layout of the integration tests (docs/ARCHITECTURE.md, "Tests"): a few test binaries, one
//! per subject (`tests/<subject>/main.rs`), whose test files are modules of that binary. Every
//! binary links rumus and wgpu, so a binary per file cost minutes of link time; and a file not
//! declared in its binary's `main.rs` would silently never run.

use std::path::Path;

/// The folders of `tests/` that are not test binaries of the root package.
const NOT_BINARIES: &[&str] = &["common", "fixtures", "models", "ui"];

fn tests_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    all.sort();
    all
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn no_test_file_sits_at_the_top_of_tests() {
    let loose: Vec<String> = entries(&tests_dir())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| file_name(&p))
        .collect();
    assert!(
        loose.is_empty(),
        "tests/{{{}}}: move each into the binary of its subject, tests/<subject>/NAME.rs, and declare \
         `mod NAME;` in tests/<subject>/main.rs (docs/ARCHITECTURE.md, \"Tests\")",
        loose.join(",")
    );
}

#[test]
fn every_test_file_is_a_module_of_its_binary() {
    let mut binaries = 0;
    let mut undeclared = Vec::new();
    for dir in entries(&tests_dir()).into_iter().filter(|p| p.is_dir()) {
        if NOT_BINARIES.contains(&file_name(&dir).as_str()) {
            continue;
        }
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap_or_else(|_| {
            panic!("tests/{} is neither a test binary (no main.rs) nor listed in NOT_BINARIES", file_name(&dir))
        });
        binaries += 1;
        for file in entries(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
            let module = file.file_stem().unwrap().to_string_lossy().into_owned();
            if module != "main" && !main.lines().any(|l| l.trim() == format!("mod {module};")) {
                undeclared.push(format!("tests/{}/{module}.rs", file_name(&dir)));
            }
        }
    }
    assert!(binaries >= 5, "found only {binaries} test binaries under tests/");
    assert!(undeclared.is_empty(), "test files no main.rs declares (they would never run):\n{}", undeclared.join("\n"));
}

/// Calls that change the process's environment (split so this file does not name them).
const CHANGES: [&str; 2] = [concat!("env::set", "_var("), concat!("env::remove", "_var(")];

/// Tests of one binary share a process: one that changes the environment changes it for the
/// others. Such a test runs itself in a child process instead (`common::run_child`).
#[test]
fn no_test_changes_the_process_environment() {
    let mut found = Vec::new();
    for dir in
        entries(&tests_dir()).into_iter().filter(|p| p.is_dir() && !NOT_BINARIES.contains(&file_name(p).as_str()))
    {
        for file in entries(&dir) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if CHANGES.iter().any(|c| code.contains(c)) {
                    found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "use common::run_child with the variables instead:\n{}", found.join("\n"));
}
