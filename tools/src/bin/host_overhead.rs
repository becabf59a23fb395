//! Host time per op of the wgpu backend: tiny ops (whose kernels cost next to nothing) timed on
//! the wall clock, so what is measured is what the host spends validating, recording the graph,
//! allocating, writing parameters, creating bind groups, encoding, submitting and waiting.
//! Issue #32: the 1024³ matmul and softmax workloads of `bench` lag their kernel figures by this.
//!
//! ```text
//! cargo run --release -p rumus-tools --bin host_overhead -- [--ops N] [--repeats R] [--only add,matmul,...]
//! ```
//!
//! Rows (µs per op, or per iteration where a row ends with a sync): `N` ops recorded then one
//! sync (recording cost per op), and the `bench` loops on tiny shapes (op + sync per iteration:
//! what a 1024³ matmul pays on top of its kernel). On lavapipe (CPU Vulkan) the rows are host
//! time of the CPU running the tests, plus lavapipe's own (CPU) execution of the tiny kernels.

use std::time::Instant;

use rumus::{no_grad, Device, RawTensor, Result};

/// CPU time of the calling thread, in seconds: the host's own work, without the time it waits
/// for the device or for a core (the machine may be shared).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant the C library knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Medians of wall time and of this thread's CPU time of `f` over `repeats` runs, after two
/// warm-up runs.
fn median(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    for _ in 0..2 {
        f()?;
    }
    let (mut wall, mut cpu) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
    for _ in 0..repeats {
        let (start, start_cpu) = (Instant::now(), thread_cpu());
        f()?;
        cpu.push(thread_cpu() - start_cpu);
        wall.push(start.elapsed().as_secs_f64());
    }
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    Ok((mid(&mut wall), mid(&mut cpu)))
}

/// `bench`'s sync: one element read back.
fn sync(t: &RawTensor) -> Result<()> {
    t.narrow(0, 0, 1)?.reshape(&[t.numel() / t.shape()[0]])?.narrow(0, 0, 1)?.to_vec().map(|_| ())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let number = |flag: &str, default: usize| -> Result<usize> {
        match value(flag) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| rumus::Error::InvalidArgument {
                op: "host_overhead",
                detail: format!("{flag} takes a count, got {v:?}"),
            }),
        }
    };
    let ops = number("--ops", 200)?.max(1);
    let repeats = number("--repeats", 15)?.max(1);
    let only = value("--only");
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.split(',').any(|w| w == name));

    let device = Device::wgpu()?;
    device.wait_for_kernels()?;
    println!("device: {}; {ops} ops per sync, median of {repeats}", device.name());

    let x = RawTensor::randn(&[8, 8], 0.0, 1.0, 1, &device)?;
    let y = RawTensor::randn(&[8, 8], 0.0, 1.0, 2, &device)?;
    let g = RawTensor::randn(&[8, 8], 0.0, 1.0, 3, &device)?;
    let xg = x.requires_grad_()?;

    let mut rows: Vec<(&str, f64, f64)> = Vec::new();
    let mut row = |name: &'static str, per: usize, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        let (wall, cpu) = median(repeats, f)?;
        rows.push((name, wall / per as f64 * 1e6, cpu / per as f64 * 1e6));
        Ok(())
    };
    if wanted("sync") {
        row("sync alone (1-element read back)", 1, &mut || sync(&x))?;
    }
    if wanted("add") {
        row("add [8,8], N per sync (no_grad)", ops, &mut || {
            let mut last = x.clone();
            no_grad(|| -> Result<()> {
                for _ in 0..ops {
                    last = x.add(&y)?;
                }
                Ok(())
            })?;
            sync(&last)
        })?;
    }
    if wanted("matmul") {
        row("matmul 8x8x8, N per sync (no_grad)", ops, &mut || {
            let mut last = x.clone();
            no_grad(|| -> Result<()> {
                for _ in 0..ops {
                    last = x.matmul(&y)?;
                }
                Ok(())
            })?;
            sync(&last)
        })?;
        row("matmul 8x8x8 + sync (bench's loop)", 1, &mut || no_grad(|| sync(&x.matmul(&y)?)))?;
    }
    if wanted("parts") {
        row("softmax [8,8], N per sync (no_grad)", ops, &mut || {
            let mut last = x.clone();
            no_grad(|| -> Result<()> {
                for _ in 0..ops {
                    last = x.softmax(-1)?;
                }
                Ok(())
            })?;
            sync(&last)
        })?;
        row("sum_all [8,8], N per sync (no_grad)", ops, &mut || {
            let mut last = x.clone();
            no_grad(|| -> Result<()> {
                for _ in 0..ops {
                    last = x.sum_all()?;
                }
                Ok(())
            })?;
            sync(&last.reshape(&[1])?)
        })?;
        row("softmax, mul, sum_all [8,8] with graph, N per sync", ops, &mut || {
            let mut last = x.clone();
            for _ in 0..ops {
                last = xg.softmax(-1)?.mul(&g)?.sum_all()?;
            }
            sync(&last.reshape(&[1])?)
        })?;
    }
    if wanted("softmax") {
        row("softmax fwd+bwd [8,8], N per sync", ops, &mut || {
            let mut last = x.clone();
            for _ in 0..ops {
                let out = xg.softmax(-1)?;
                let grads = out.mul(&g)?.sum_all()?.backward()?;
                if let Some(dx) = grads.get(&xg) {
                    last = dx.clone();
                }
            }
            sync(&last)
        })?;
        row("softmax fwd+bwd [8,8] + sync (bench's loop)", 1, &mut || {
            let out = xg.softmax(-1)?;
            let grads = out.mul(&g)?.sum_all()?.backward()?;
            grads.get(&xg).map(sync).unwrap_or(Ok(()))
        })?;
    }
    let width = rows.iter().map(|(n, ..)| n.len()).max().unwrap_or(0);
    println!("{:<width$}  {:>9}  {:>9}", "µs per op (or per iteration)", "wall", "host CPU");
    for (name, wall, cpu) in rows {
        println!("{name:<width$}  {wall:>9.1}  {cpu:>9.1}");
    }
    Ok(())
}
