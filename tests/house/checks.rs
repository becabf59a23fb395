//! The house checks, run by the test suite so that CI (which runs README's test command through
//! `.ci/run`) runs them too: formatting, clippy with warnings denied, the docs with warnings
//! denied, the CPU-only build's tests, `cargo package` of the published crates with every file
//! they need, and the matmul kernels against their generator. Each check is a subprocess whose
//! output the failure message prints.
//!
//! The cargo subprocesses build into their own target folder ([`HOUSE_TARGET`]), so they never
//! wait for the lock of the cargo that runs this test. A missing tool (rustfmt, clippy, python3)
//! prints a `SKIPPED` notice, or fails the test when `RUMUS_REQUIRE_HOUSE=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel generators (the matmul kernels, Winograd F(4×4, 3×3)'s transforms), relative to
/// the workspace root; each writes the files it generates into the folder given with `--out`.
const GENERATORS: &[&str] = &["tools/gen/matmul.py", "tools/gen/winograd4.py"];

/// Where the generated kernels are committed, relative to the workspace root.
const SHADERS: &str = "rumus/shaders";

/// The target folder of the cargo subprocesses, relative to the workspace root.
const HOUSE_TARGET: &str = "target/house";

/// The crates published from this workspace, dependencies first.
const PUBLISHED: &[&str] = &["rumus-macros", "rumus"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo` (the one running this test) in the workspace root, building into [`HOUSE_TARGET`].
fn cargo(args: &[&str]) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(args).current_dir(root()).env("CARGO_TARGET_DIR", root().join(HOUSE_TARGET));
    command
}

/// Runs `command`; its exit status and its stdout and stderr together.
fn run(command: &mut Command) -> (bool, String) {
    let shown = format!("{command:?}");
    let output = command.output().unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let text =
        format!("$ {shown}\n{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Runs `command` and fails the test with `what` and the tool's output unless it succeeds.
fn check(what: &str, command: &mut Command) -> String {
    let (ok, text) = run(command);
    assert!(ok, "{what}\n\n{text}");
    text
}

/// Whether the tool `probe` asks for is there (its `--version` succeeds). When it is not:
/// a failure under `RUMUS_REQUIRE_HOUSE=1`, else a `SKIPPED` notice and `false`.
fn tool(name: &str, install: &str, probe: &mut Command) -> bool {
    if matches!(probe.output(), Ok(output) if output.status.success()) {
        return true;
    }
    if std::env::var("RUMUS_REQUIRE_HOUSE").as_deref() == Ok("1") {
        panic!("RUMUS_REQUIRE_HOUSE=1 but {name} is missing ({install})");
    }
    let notice = format!("\n**********\nSKIPPED: {name} is missing ({install})\n**********\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
    false
}

#[test]
fn code_is_formatted() {
    if !tool("rustfmt", "rustup component add rustfmt", &mut cargo(&["fmt", "--version"])) {
        return;
    }
    check("code is not formatted: run `cargo fmt --all`", &mut cargo(&["fmt", "--all", "--check"]));
}

#[test]
fn clippy_finds_nothing() {
    if !tool("clippy", "rustup component add clippy", &mut cargo(&["clippy", "--version"])) {
        return;
    }
    check(
        "clippy warns (denied)",
        &mut cargo(&["clippy", "--workspace", "--all-targets", "--release", "--", "-D", "warnings"]),
    );
    // The CPU-only build compiles other code (`cfg(not(feature = "wgpu"))`) and leaves some out.
    check(
        "clippy warns on the CPU-only build (denied)",
        &mut cargo(&[
            "clippy",
            "-p",
            "rumus",
            "--no-default-features",
            "--all-targets",
            "--release",
            "--",
            "-D",
            "warnings",
        ]),
    );
    // The `mpi` feature (rumus::distributed::Mpi, the distributed example) needs an MPI library;
    // tests/reliability/mpi.rs says when it is missing.
    if Command::new("mpicc").arg("--version").output().is_ok_and(|o| o.status.success()) {
        check(
            "clippy warns on the `mpi` feature (denied)",
            &mut cargo(&[
                "clippy",
                "-p",
                "rumus",
                "--features",
                "mpi",
                "--all-targets",
                "--release",
                "--",
                "-D",
                "warnings",
            ]),
        );
    }
}

/// Broken intra-doc links, bare URLs, unclosed HTML tags ... in any crate's docs. `--release`
/// shares the dependencies' metadata with the clippy check in [`HOUSE_TARGET`].
#[test]
fn docs_build_without_warnings() {
    let mut command = cargo(&["doc", "--workspace", "--no-deps", "--release"]);
    command.env("RUSTDOCFLAGS", "-D warnings");
    check("rustdoc warns (denied)", &mut command);
}

/// `rumus` without its default features (no wgpu, indicatif, plotters, tar, zip): it builds and
/// its unit tests and doctests pass.
#[test]
fn cpu_only_build_passes_its_tests() {
    check(
        "the CPU-only build (`--no-default-features`) fails",
        &mut cargo(&["test", "-p", "rumus", "--no-default-features", "--release"]),
    );
}

/// Every file under `dir`, relative to `base`, with `/` separators.
fn files_under(base: &Path, dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("readable folder entry").path();
        if path.is_dir() {
            files.extend(files_under(base, &path));
        } else {
            let relative = path.strip_prefix(base).expect("under base");
            files.push(relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"));
        }
    }
    files
}

/// The files a crate's sources pull in at compile time (`include_str!` / `include_bytes!` of a
/// literal path, or of `concat!` of literals naming a folder, as the shader tables do: every file
/// in that folder then counts), relative to the crate root.
fn included_files(krate: &Path) -> Vec<String> {
    let mut needed = Vec::new();
    for source in files_under(krate, &krate.join("src")).into_iter().filter(|f| f.ends_with(".rs")) {
        let path = krate.join(&source);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for call in ["include_str!(", "include_bytes!("] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                let rest = rest.strip_prefix("concat!(").unwrap_or(rest);
                let Some(literal) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) else { continue };
                let target = path.parent().expect("a folder").join(literal);
                let target = normalize(&target);
                // Paths leaving the crate (the macro crate's docs checks read ../../docs) are
                // unit-test inputs, not package files; only those inside are needed.
                let Ok(inside) = target.strip_prefix(normalize(krate)) else { continue };
                if literal.ends_with('/') {
                    needed.extend(files_under(krate, &target));
                } else {
                    needed.push(inside.to_string_lossy().replace('\\', "/"));
                }
            }
        }
    }
    needed.sort();
    needed.dedup();
    needed
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `cargo package` of every published crate succeeds (without verification, which would build
/// them again; offline where cargo's cache allows, as it does once the workspace built; and of
/// the working tree as it is, committed or not), and
/// each package lists every file its sources include at compile time, among them every WGSL
/// file of `rumus/shaders/`.
#[test]
fn published_crates_package_with_every_file_they_need() {
    let mut args = vec!["package", "--no-verify", "--allow-dirty"];
    for krate in PUBLISHED {
        args.extend(["-p", krate]);
    }
    // Offline first; where cargo's index cache lacks an entry the package's lock file needs,
    // once more with the index updated.
    let (offline, first) = run(&mut cargo(&[args.as_slice(), &["--offline"]].concat()));
    if !offline {
        let (online, second) = run(&mut cargo(&args));
        assert!(online, "`cargo package` of the published crates fails\n\n{first}\n{second}");
    }
    let mut missing = Vec::new();
    for krate in PUBLISHED {
        let listed = check(
            &format!("`cargo package --list` of {krate} fails"),
            &mut cargo(&["package", "-p", krate, "--no-verify", "--offline", "--allow-dirty", "--list"]),
        );
        let listed: Vec<&str> = listed.lines().map(str::trim).collect();
        let dir = root().join(krate);
        let mut needed = included_files(&dir);
        if *krate == "rumus" {
            let wgsl = files_under(&dir, &dir.join("shaders")).into_iter().filter(|f| f.ends_with(".wgsl"));
            needed.extend(wgsl.collect::<Vec<_>>());
            assert!(needed.iter().any(|f| f.ends_with(".wgsl")), "found no WGSL file under rumus/shaders");
            needed.sort();
            needed.dedup();
        }
        missing.extend(needed.iter().filter(|f| !listed.contains(&f.as_str())).map(|f| format!("{krate}: {f}")));
    }
    assert!(missing.is_empty(), "files the crates need are not in their packages:\n{}", missing.join("\n"));
}

/// The generated kernels are what their generators write now (edit the generator, not the
/// kernels; then run it).
#[test]
fn generated_kernels_match_their_generators() {
    if !tool("python3", "apt-get install python3", Command::new("python3").arg("--version")) {
        return;
    }
    let mut stale = Vec::new();
    for (k, generator) in GENERATORS.iter().enumerate() {
        let out = root().join(HOUSE_TARGET).join(format!("generated-{k}"));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        check(
            &format!("{generator} fails"),
            Command::new("python3").arg(root().join(generator)).arg("--out").arg(&out).current_dir(root()),
        );
        let generated = files_under(&out, &out);
        assert!(!generated.is_empty(), "{generator} --out {} wrote nothing", out.display());
        for file in &generated {
            let fresh = std::fs::read_to_string(out.join(file)).expect("generated file readable");
            let committed = root().join(SHADERS).join(file);
            match std::fs::read_to_string(&committed) {
                Ok(text) if text == fresh => {}
                Ok(_) => stale.push(format!(
                    "{SHADERS}/{file} differs from what {generator} writes; run it and commit its output"
                )),
                Err(e) => stale.push(format!("{SHADERS}/{file}: {e}")),
            }
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

/// The files of a `.crate` (a gzipped tar), by path, with their contents.
fn crate_files(path: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let gz = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(gz).read_to_end(&mut tar).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut files = Vec::new();
    let mut at = 0;
    // ustar: 512-byte headers (name at 0..100, prefix at 345..500, octal size at 124..136),
    // each followed by the contents padded to 512 bytes; two zero blocks end the archive.
    while at + 512 <= tar.len() && tar[at] != 0 {
        let header = &tar[at..at + 512];
        let text = |range: std::ops::Range<usize>| {
            String::from_utf8_lossy(&header[range]).trim_end_matches('\0').trim().to_string()
        };
        let size = usize::from_str_radix(&text(124..136), 8).expect("an octal size");
        let (prefix, name) = (text(345..500), text(0..100));
        let name = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        files.push((name, tar[at + 512..at + 512 + size].to_vec()));
        at += 512 + size.div_ceil(512) * 512;
    }
    files
}

/// The published `rumus` depends on this workspace's `rumus-macros`: the lock file packed into
/// `rumus`'s package resolves `rumus-macros` to the version `rumus-macros/Cargo.toml` declares
/// and to the very package `cargo package` made of it (same SHA-256).
///
/// Fails today: crates.io already holds unrelated crates named `rumus` (0.4.0) and
/// `rumus-macros` (0.1.3, "Proc macros for the RUMUS deep learning framework"); `rumus`'s
/// requirement `^0.1.0` resolves to that 0.1.3, so the package would build against another
/// project's macros. Publishing needs other names (the project's decision); until then the test
/// is ignored (`cargo test --release --test house -- --ignored` runs it).
#[test]
#[ignore = "crates.io already has unrelated crates named rumus and rumus-macros: the crates need new names to publish"]
fn packaged_rumus_depends_on_this_workspaces_macros() {
    published_crates_package_with_every_file_they_need();
    let version = env!("CARGO_PKG_VERSION");
    let package = root().join(HOUSE_TARGET).join("package");
    let macros = package.join(format!("rumus-macros-{version}.crate"));
    let (ok, sha) = run(Command::new("sha256sum").arg(&macros));
    assert!(ok, "sha256sum of the packaged macros fails\n{sha}");
    let ours = sha.lines().nth(1).and_then(|l| l.split_whitespace().next()).expect("a digest").to_string();
    let files = crate_files(&package.join(format!("rumus-{version}.crate")));
    let lock =
        files.iter().find(|(name, _)| name.ends_with("/Cargo.lock")).expect("rumus's package holds a Cargo.lock");
    let lock = String::from_utf8_lossy(&lock.1);
    let entry =
        lock.split("[[package]]").find(|p| p.contains("name = \"rumus-macros\"")).expect("the lock names rumus-macros");
    assert!(
        entry.contains(&format!("version = \"{version}\"")) && entry.contains(&ours),
        "the packaged rumus resolves rumus-macros to another crate than this workspace's \
         (version {version}, sha256 {ours}):\n{entry}"
    );
}
