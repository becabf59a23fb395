//! Data-parallel training over MPI (issue #31): `rumus/examples/distributed.rs`, built with the
//! `mpi` feature into the house checks' target folder (so it never waits for the lock of the
//! cargo running the suite), run by `mpirun -np 2` on the CPU backend with a tiny synthetic job.
//!
//! Skipped (with a notice) when `mpirun` is missing, unless `RUMUS_REQUIRE_MPI=1` (`.ci/run`
//! sets it after installing `libopenmpi-dev openmpi-bin libclang-dev`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Two ranks of batch B against one rank of batch 2B: the largest difference of any weight
/// allowed after 2 epochs of 16 SGD steps (the sums are taken in another order; measured: 4e-8).
const TOLERANCE: f32 = 1e-5;

/// How long a job may take before the test fails it as hung (the failing jobs end in about a
/// second; a collective waits at most `RUMUS_MPI_TIMEOUT`, set below to 20 s).
const JOB_LIMIT: Duration = Duration::from_secs(90);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `mpirun` is there; when not, a failure under `RUMUS_REQUIRE_MPI=1`, else a notice.
fn mpi_available() -> bool {
    if matches!(Command::new("mpirun").arg("--version").output(), Ok(o) if o.status.success()) {
        return true;
    }
    if std::env::var("RUMUS_REQUIRE_MPI").as_deref() == Ok("1") {
        panic!("RUMUS_REQUIRE_MPI=1 but mpirun is missing (apt-get install libopenmpi-dev openmpi-bin libclang-dev)");
    }
    let notice = "\n**********\nSKIPPED: mpirun is missing (apt-get install libopenmpi-dev openmpi-bin libclang-dev)\n**********\n";
    let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
    false
}

/// The example, built once per test process (rumus without default features, with `mpi`).
fn example() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let target = root().join("target/house");
        let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--release", "-p", "rumus", "--no-default-features", "--features", "mpi"])
            .args(["--example", "distributed"])
            .current_dir(root())
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .map_err(|e| format!("cannot start cargo: {e}"))?;
        if !output.status.success() {
            return Err(format!("building the example failed:\n{}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(target.join("release/examples/distributed"))
    });
    match built {
        Ok(path) => path,
        Err(e) => panic!("{e}"),
    }
}

/// Runs the example under `mpirun -np ranks` with `args`; its success and its output. Fails
/// the test when the job is not over within [`JOB_LIMIT`].
fn job(ranks: usize, args: &[&str], log: &Path) -> (bool, String) {
    let file = std::fs::File::create(log).expect("log file");
    let mut child = Command::new("mpirun")
        .args(["-np", &ranks.to_string(), "--oversubscribe", "--allow-run-as-root"])
        .args(["-x", "RUMUS_MPI_TIMEOUT=20", "-x", "RAYON_NUM_THREADS=1"])
        .arg(example())
        .args(["--synthetic"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .expect("mpirun starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("mpirun's status") {
            break status;
        }
        if started.elapsed() > JOB_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mpirun {args:?} did not end within {JOB_LIMIT:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.success(), std::fs::read_to_string(log).unwrap_or_default())
}

/// Runs `job` with `--out OUT` appended (the folder created first) and fails the test, with the
/// job's log, unless every rank succeeds. Returns the log.
fn job_into(ranks: usize, args: &[&str], out: &Path, log: &Path) -> String {
    std::fs::create_dir_all(out).expect("output folder");
    let mut all = args.to_vec();
    all.extend(["--out", out.to_str().expect("utf-8")]);
    let (ok, text) = job(ranks, &all, log);
    assert!(ok, "mpirun -np {ranks} {all:?} failed:\n{text}");
    text
}

/// Every tensor of a safetensors file, by name.
fn tensors(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
    let mut out: Vec<(String, Vec<f32>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            (name, values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The values of column `name` of a history CSV, one per epoch.
fn column(path: &Path, name: &str) -> Vec<f32> {
    let text = std::fs::read_to_string(path).expect("history.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let at = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"));
    lines.map(|l| l.split(',').nth(at).and_then(|v| v.parse().ok()).expect("a number")).collect()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A fresh folder under the system's temporary folder.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rumus-mpi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

#[test]
fn two_ranks_of_batch_b_train_the_weights_of_one_rank_of_batch_2b_and_only_rank_0_writes() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("same");
    let (two, one) = (dir.join("two"), dir.join("one"));
    for (ranks, batch, out) in [(2, "8", &two), (1, "16", &one)] {
        let text = job_into(ranks, &["--batch-size", batch], out, &dir.join("log"));
        // Only rank 0 wrote: no rank1.txt, no temporary file, one history.
        let expected = [
            "ckpt-1.safetensors",
            "ckpt-2.safetensors",
            "history.csv",
            "optimizer.safetensors",
            "rank0.txt",
            "weights.safetensors",
        ];
        assert_eq!(files(out), expected, "files written by -np {ranks}:\n{text}");
        if ranks == 2 {
            // Every rank trained and evaluated the same model on the whole data.
            let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("rank ")).collect();
            assert_eq!(lines.len(), 2, "{text}");
            let tail = |l: &str| l.split(" in ").next().unwrap_or("").split(':').nth(1).unwrap_or("").to_string();
            assert_eq!(tail(lines[0]), tail(lines[1]), "ranks disagree:\n{text}");
        }
    }
    let (a, b) = (tensors(&two.join("weights.safetensors")), tensors(&one.join("weights.safetensors")));
    assert_eq!(a.iter().map(|t| &t.0).collect::<Vec<_>>(), b.iter().map(|t| &t.0).collect::<Vec<_>>());
    let mut worst = 0.0f32;
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x.len(), y.len(), "{name}");
        for (p, q) in x.iter().zip(y) {
            assert!(p.is_finite() && q.is_finite(), "{name}: {p} {q}");
            worst = worst.max((p - q).abs());
        }
    }
    assert!(worst <= TOLERANCE, "two ranks of 8 and one of 16 differ by {worst} (> {TOLERANCE})");
    // The epochs' F1 (from per-class counts summed over the ranks) is the one rank's.
    let (f1_two, f1_one) = (column(&two.join("history.csv"), "f1"), column(&one.join("history.csv"), "f1"));
    assert_eq!(f1_two.len(), 2, "{f1_two:?}");
    for (p, q) in f1_two.iter().zip(&f1_one) {
        assert!((p - q).abs() <= 1e-6, "F1 of two ranks {f1_two:?}, of one {f1_one:?}");
    }
    // And training moved the weights: the first checkpoint differs from the last.
    let first = tensors(&one.join("ckpt-1.safetensors"));
    assert!(first.iter().zip(&b).any(|(f, l)| f.1 != l.1), "the weights did not change");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_with_nan_gradients_ends_every_rank_with_an_error_naming_it() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("nan");
    let (ok, text) = job(2, &["--nan-rank", "1"], &dir.join("log"));
    assert!(!ok, "the job succeeded:\n{text}");
    // Both ranks learn it in the step's all-reduce; the first to abort may end the other
    // before it prints.
    let told = ": non-finite value: fit: rank 1 of 2 computed NaN or infinite gradients in step 1 of epoch 2";
    assert!(text.contains(told), "no rank reported rank 1's NaN:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_that_dies_ends_the_job_with_an_error() {
    if !mpi_available() {
        return;
    }
    let dir = scratch("exit");
    let (ok, text) = job(2, &["--exit-rank", "1", "--epochs", "3"], &dir.join("log"));
    assert!(!ok, "the job succeeded:\n{text}");
    assert!(text.contains("this rank exits now"), "{text}");
    assert!(!text.contains("rank 0 of 2: loss"), "rank 0 finished training without rank 1:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The largest difference between the weights of two safetensors files with the same tensors.
fn largest_difference(a: &Path, b: &Path) -> f32 {
    let (a, b) = (tensors(a), tensors(b));
    assert_eq!(a.iter().map(|t| &t.0).collect::<Vec<_>>(), b.iter().map(|t| &t.0).collect::<Vec<_>>());
    let mut worst = 0.0f32;
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x.len(), y.len(), "{name}");
        for (p, q) in x.iter().zip(y) {
            assert!(p.is_finite() && q.is_finite(), "{name}: {p} {q}");
            worst = worst.max((p - q).abs());
        }
    }
    worst
}

#[test]
fn gradient_buckets_reduced_during_backward_train_the_weights_of_one_bucket_after_it() {
    if !mpi_available() {
        return;
    }
    // The MLP's 4 tensors (512, 32, 128 and 4 scalars): 0.0002 MiB (52 scalars) makes a bucket
    // of each, reduced while backward goes on; `inf` makes one, reduced after backward. Each
    // weight's sum over 2 ranks is one addition either way, so the weights agree exactly (0 is
    // the tolerance), with and without gradient accumulation.
    let dir = scratch("buckets");
    for accumulate in ["1", "2"] {
        let mut outs = Vec::new();
        for cap in ["0.0002", "inf"] {
            let out = dir.join(format!("cap-{cap}-acc-{accumulate}"));
            job_into(2, &["--bucket-mb", cap, "--accumulate", accumulate], &out, &dir.join("log"));
            outs.push(out);
        }
        let worst = largest_difference(&outs[0].join("weights.safetensors"), &outs[1].join("weights.safetensors"));
        assert!(worst == 0.0, "accumulate {accumulate}: 4 buckets and 1 differ by {worst}");
        // Training moved the weights.
        let first = largest_difference(&outs[0].join("ckpt-1.safetensors"), &outs[0].join("weights.safetensors"));
        assert!(first > 0.0, "the weights did not change");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resuming_with_the_optimizer_state_on_rank_0_only_continues_the_run() {
    if !mpi_available() {
        return;
    }
    // 4 epochs of Adam in one run, against 2 epochs, then 2 more resumed from what rank 0
    // saved (weights and Adam's moments and step counts), which rank 0 alone loads: `fit`
    // broadcasts both. Without the optimizer's broadcast rank 1 would resume with fresh
    // moments and the runs would part. Unshuffled, so both runs see the same batches; the
    // steps are the same arithmetic, so the weights agree exactly.
    let dir = scratch("resume");
    let (whole, first, second) = (dir.join("whole"), dir.join("first"), dir.join("second"));
    let runs = [
        (&whole, vec!["--epochs", "4"]),
        (&first, vec!["--epochs", "2"]),
        (&second, vec!["--epochs", "2", "--resume", first.to_str().expect("utf-8")]),
    ];
    for (out, extra) in runs {
        let mut args = vec!["--adam", "--no-shuffle"];
        args.extend(extra);
        let text = job_into(2, &args, out, &dir.join("log"));
        // Both ranks end with the same model.
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("rank ")).collect();
        assert_eq!(lines.len(), 2, "{text}");
        let tail = |l: &str| l.split(" in ").next().unwrap_or("").split(':').nth(1).unwrap_or("").to_string();
        assert_eq!(tail(lines[0]), tail(lines[1]), "ranks disagree:\n{text}");
    }
    let worst = largest_difference(&whole.join("weights.safetensors"), &second.join("weights.safetensors"));
    assert!(worst == 0.0, "4 epochs and 2 + 2 resumed differ by {worst}");
    let moved = largest_difference(&first.join("weights.safetensors"), &second.join("weights.safetensors"));
    assert!(moved > 0.0, "the resumed run did not train");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_augmentation_two_ranks_of_batch_b_train_the_weights_of_one_rank_of_batch_2b() {
    if !mpi_available() {
        return;
    }
    // Each sample's random crop and flip depend on its position in the epoch's global order,
    // so rank r draws for its slice what one process of batch 2B draws for the same samples.
    // Another augmentation seed gives other weights: the draws matter.
    let dir = scratch("augment");
    let mut outs = Vec::new();
    for (ranks, batch, seed) in [(2, "8", "5"), (1, "16", "5"), (1, "16", "6")] {
        let out = dir.join(format!("{ranks}-{seed}"));
        job_into(ranks, &["--augment", "--augment-seed", seed, "--batch-size", batch], &out, &dir.join("log"));
        outs.push(out.join("weights.safetensors"));
    }
    let worst = largest_difference(&outs[0], &outs[1]);
    assert!(worst <= TOLERANCE, "with augmentation, two ranks of 8 and one of 16 differ by {worst} (> {TOLERANCE})");
    let other = largest_difference(&outs[1], &outs[2]);
    assert!(other > 100.0 * TOLERANCE, "another augmentation seed changed the weights by only {other}");
    let _ = std::fs::remove_dir_all(&dir);
}
