//! Hardening of the wgpu backend (issue #27): index range checks on the device, deterministic
//! scatter-adds, backends that do not share a command stream kept apart, views of any rank, and
//! a quiet start on a headless machine. Tiny tensors: lavapipe is slow.

use std::sync::Arc;

use rumus::backend::wgpu::{transfer_count, WgpuBackend};
use rumus::backend::{GatherArgs, IndexArgs};
use rumus::rng::Rng;
use rumus::testing::wgpu_or_skip;
use rumus::{Device, Error, RawTensor, Result};

use crate::common::{in_child, run_child, test_path};

fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 2.0 - 1.0).collect()
}

/// The fields of an out-of-range error, or a panic naming what came instead.
fn out_of_range<T: std::fmt::Debug>(what: &str, r: Result<T>) -> (&'static str, i64, usize, usize) {
    match r {
        Err(Error::IndexOutOfRange { op, index, limit, position }) => (op, index, limit, position),
        other => panic!("{what}: expected Error::IndexOutOfRange, got {other:?}"),
    }
}

/// `f` on the CPU and on `gpu` with the same inputs (f32 data, u32 indices, each with its
/// shape): both fail with the same out-of-range error.
fn same_error(
    gpu: &Device,
    what: &str,
    data: (&[f32], &[usize]),
    idx: (&[u32], &[usize]),
    f: impl Fn(&RawTensor, &RawTensor) -> Result<RawTensor>,
) {
    let run = |d: &Device| {
        let x = RawTensor::from_vec(data.0.to_vec(), data.1, d).unwrap();
        let i = RawTensor::from_indices(idx.0, idx.1, d).unwrap();
        f(&x, &i).map(|t| t.to_vec())
    };
    let cpu = out_of_range(&format!("{what} on cpu"), run(&Device::cpu()));
    let wgpu = out_of_range(&format!("{what} on wgpu"), run(gpu));
    assert_eq!(wgpu, cpu, "{what}: (op, index, limit, position) on wgpu vs cpu");
}

#[test]
fn bad_class_targets_fail_at_the_call_like_the_cpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    let logits = values(4 * 5, 1);
    for (targets, smoothing) in [([0u32, 4, 5, 1], 0.0), ([7, 0, 1, 9], 0.1), ([0, 1, 2, 40], 0.0)] {
        same_error(&gpu, &format!("cross_entropy {targets:?}"), (&logits, &[4, 5]), (&targets, &[4]), |x, t| {
            x.cross_entropy(t, smoothing)
        });
        same_error(&gpu, &format!("nll_loss {targets:?}"), (&logits, &[4, 5]), (&targets, &[4]), |x, t| {
            x.log_softmax(-1)?.nll_loss(t)
        });
    }
    // Many classes: the workgroup-per-row kernel.
    let wide = values(3 * 40, 2);
    same_error(&gpu, "cross_entropy 40 classes", (&wide, &[3, 40]), (&[3, 40, 1], &[3]), |x, t| {
        x.cross_entropy(t, 0.0)
    });
}

#[test]
fn bad_embedding_and_gather_indices_fail_like_the_cpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    let table = values(6 * 3, 3);
    same_error(&gpu, "embedding", (&table, &[6, 3]), (&[1, 5, 6, 2, 9, 0], &[2, 3]), |w, i| i.embedding(w));
    same_error(&gpu, "index_select axis 1", (&table, &[6, 3]), (&[0, 2, 3], &[3]), |x, i| x.index_select(1, i));
    let idx = [0u32, 1, 2, 1, 0, 2, 3, 1];
    same_error(&gpu, "gather axis 1", (&table, &[6, 3]), (&idx, &[4, 2]), |x, i| x.gather(1, i));
    same_error(&gpu, "gather axis 0", (&table, &[6, 3]), (&[0, 6, 2, 7, 1, 0], &[2, 3]), |x, i| x.gather(0, i));
}

#[test]
fn random_index_checks_agree_with_the_cpu() {
    // A property over seeded cases: for any indices, index_select and gather on wgpu either both
    // fail like the CPU (same op, index, limit, position) or return the CPU's values.
    let Some(gpu) = wgpu_or_skip() else { return };
    let mut rng = Rng::new(11);
    for case in 0..12 {
        let (rows, cols) = (1 + rng.below(5), 1 + rng.below(4));
        let data = values(rows * cols, case);
        let count = 1 + rng.below(6);
        // Mostly in range; sometimes one past the end, sometimes far.
        let idx: Vec<u32> = (0..count * cols)
            .map(|_| match rng.below(10) {
                0 => rows as u32,
                1 => rng.below(1000) as u32 + rows as u32,
                _ => rng.below(rows) as u32,
            })
            .collect();
        let select_idx = &idx[..count];
        let cases: [(&str, &[u32], Vec<usize>); 2] =
            [("index_select", select_idx, vec![count]), ("gather", &idx, vec![count, cols])];
        for (name, idx, shape) in cases {
            let run = |d: &Device| -> Result<Vec<f32>> {
                let x = RawTensor::from_vec(data.clone(), &[rows, cols], d)?;
                let i = RawTensor::from_indices(idx, &shape, d)?;
                let y = if name == "gather" { x.gather(0, &i)? } else { x.index_select(0, &i)? };
                y.to_vec()
            };
            match (run(&Device::cpu()), run(&gpu)) {
                (Ok(c), Ok(g)) => assert_eq!(g, c, "case {case} {name}: values"),
                (Err(c), Err(g)) => assert_eq!(g.to_string(), c.to_string(), "case {case} {name}: errors"),
                (c, g) => panic!("case {case} {name} {idx:?}: cpu {c:?}, wgpu {g:?}"),
            }
        }
    }
}

#[test]
fn indices_a_kernel_computed_are_checked_too() {
    let Some(gpu) = wgpu_or_skip() else { return };
    // Argmax over 8 columns gives targets up to 7: the host cannot vouch for 5 classes, so the
    // kernel's flag is read back.
    let mut scores = vec![0.0f32; 4 * 8];
    for (row, best) in [(0, 1), (1, 4), (2, 6), (3, 2)] {
        scores[row * 8 + best] = 1.0;
    }
    let logits = values(4 * 5, 4);
    let run = |d: &Device| {
        let t = RawTensor::from_vec(scores.clone(), &[4, 8], d)?.argmax(1)?;
        RawTensor::from_vec(logits.clone(), &[4, 5], d)?.cross_entropy(&t, 0.0)?.item()
    };
    let cpu = out_of_range("argmax targets on cpu", run(&Device::cpu()));
    assert_eq!(cpu, ("cross_entropy", 6, 5, 2));
    assert_eq!(out_of_range("argmax targets on wgpu", run(&gpu)), cpu);
    // In range after all (columns 0..5 only): the check passes and the loss matches.
    let ok = |d: &Device| {
        let t = RawTensor::from_vec(scores.clone(), &[4, 8], d)?.narrow(1, 0, 5)?.argmax(1)?;
        RawTensor::from_vec(logits.clone(), &[4, 5], d)?.cross_entropy(&t, 0.0)?.item()
    };
    let (c, g) = (ok(&Device::cpu()).unwrap(), ok(&gpu).unwrap());
    assert!((c - g).abs() < 1e-5, "loss with in-range computed targets: cpu {c}, wgpu {g}");
    // A narrowed view of uploaded indices whose storage holds a bad one outside the view.
    let view = |d: &Device| -> Result<Vec<f32>> {
        let i = RawTensor::from_indices(&[2, 0, 1, 99], &[4], d)?.narrow(0, 0, 3)?;
        RawTensor::from_vec(values(4 * 2, 5), &[4, 2], d)?.index_select(0, &i)?.to_vec()
    };
    assert_eq!(view(&gpu).unwrap(), view(&Device::cpu()).unwrap());
}

/// Loss scaling's non-finite flag is a u32 storage that a kernel raises in place: used as
/// indices afterwards, its raised value is checked like any computed index (the host's bound
/// from the upload of 0 no longer vouches for it).
#[test]
fn unscale_grad_flags_raised_in_place_are_checked_as_indices() {
    let Some(gpu) = wgpu_or_skip() else { return };
    let run = |d: &Device| {
        let flag = rumus::testing::non_finite_flag(d)?;
        let grad = RawTensor::from_vec(vec![1.0, f32::INFINITY], &[2], d)?;
        rumus::testing::unscale_grad(&grad, 0.5, &flag)?;
        RawTensor::from_vec(vec![1.0, 2.0], &[1, 2], d)?.index_select(0, &flag)?.to_vec()
    };
    let cpu = out_of_range("raised flag on cpu", run(&Device::cpu()));
    assert_eq!(cpu, ("index_select", 1, 1, 0));
    assert_eq!(out_of_range("raised flag on wgpu", run(&gpu)), cpu);
}

#[test]
fn backend_adjoints_refuse_bad_indices() {
    // The backend is public (custom ops): its scatter-adds check indices too.
    let Some(Device::Wgpu(b)) = wgpu_or_skip() else { return };
    use rumus::backend::Backend;
    let grad = b.from_f32(&[1.0; 6]).unwrap();
    let idx = b.from_u32(&[0, 3, 1]).unwrap();
    let args = IndexArgs { outer: 1, len: 3, inner: 2, count: 3 };
    let got = out_of_range("index_add", b.index_add(&grad, &idx, &args));
    assert_eq!(got, ("index_select", 3, 3, 1));
    let idx = b.from_u32(&[0, 1, 2, 1, 0, 5]).unwrap();
    let args = GatherArgs { outer: 1, len: 3, inner: 2, count: 3 };
    assert_eq!(out_of_range("scatter_add", b.scatter_add(&grad, &idx, &args)), ("gather", 5, 3, 5));
    // An empty axis: every index is out of range.
    let args = GatherArgs { outer: 1, len: 0, inner: 2, count: 3 };
    assert_eq!(out_of_range("scatter_add len 0", b.scatter_add(&grad, &idx, &args)), ("gather", 0, 0, 0));
    // The device is fine afterwards.
    let good = b.from_u32(&[2, 0, 2]).unwrap();
    let args = IndexArgs { outer: 1, len: 3, inner: 2, count: 3 };
    let sums = b.to_f32(&b.index_add(&grad, &good, &args).unwrap(), &rumus::Layout::contiguous(&[6])).unwrap();
    assert_eq!(sums, vec![1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);
}

/// `len` values of magnitudes from 1e-3 to 1e3, so that the order of a sum shows in its bits.
fn spread(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..len).map(|_| (rng.uniform() * 2.0 - 1.0) * 10f32.powi(rng.below(7) as i32 - 3)).collect()
}

/// Gradients of `weight` through embedding then through gather, for indices with many repeats.
fn scatter_gradients(device: &Device) -> Result<(Vec<f32>, Vec<f32>)> {
    let (vocab, dim, count) = (5, 16, 20_000);
    let mut rng = Rng::new(7);
    // Mostly index 1: thousands of rows summed into one, where the order of the adds shows.
    let ids: Vec<u32> = (0..count).map(|_| if rng.below(4) == 0 { rng.below(vocab) as u32 } else { 1 }).collect();
    let weight = RawTensor::from_vec(values(vocab * dim, 8), &[vocab, dim], device)?.requires_grad_()?;
    let upstream = RawTensor::from_vec(spread(count * dim, 9), &[count, dim], device)?;
    let ids = RawTensor::from_indices(&ids, &[count], device)?;
    let loss = ids.embedding(&weight)?.mul(&upstream)?.sum_all()?;
    let emb = loss.backward()?.get(&weight).map(|g| g.to_vec()).transpose()?.unwrap_or_default();

    let (rows, picked) = (3, 1000);
    let x = RawTensor::from_vec(values(rows * vocab, 10), &[rows, vocab], device)?.requires_grad_()?;
    let picks: Vec<u32> = (0..rows * picked).map(|_| rng.below(2) as u32).collect();
    let picks = RawTensor::from_indices(&picks, &[rows, picked], device)?;
    let scale = RawTensor::from_vec(spread(rows * picked, 12), &[rows, picked], device)?;
    let loss = x.gather(1, &picks)?.mul(&scale)?.sum_all()?;
    let gat = loss.backward()?.get(&x).map(|g| g.to_vec()).transpose()?.unwrap_or_default();
    Ok((emb, gat))
}

#[test]
fn scatter_adds_are_bit_repeatable_and_match_the_cpu() {
    if wgpu_or_skip().is_none() {
        return;
    }
    // In a process of its own whose lavapipe (if that is the adapter) runs workgroups on four
    // threads, where float atomics land in a different order each run (no effect on real GPUs).
    let stderr = run_child(&test_path(module_path!(), "scatter_child"), &[("LP_NUM_THREADS", Some("4"))]);
    assert!(stderr.contains("scatter_child checked"), "the child did not run its checks: {stderr}");
}

#[test]
fn scatter_child() {
    if !in_child() {
        return;
    }
    let Some(gpu) = wgpu_or_skip() else { return };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let first = scatter_gradients(&gpu).unwrap();
    for run in 0..3 {
        let again = scatter_gradients(&gpu).unwrap();
        assert_eq!(bits(&again.0), bits(&first.0), "embedding backward, run {run}: not bit-identical");
        assert_eq!(bits(&again.1), bits(&first.1), "gather backward, run {run}: not bit-identical");
    }
    // The sums run in the CPU's order (index order), so they match it to the bit.
    let cpu = scatter_gradients(&Device::cpu()).unwrap();
    assert_eq!(first.0.len(), 80);
    assert_eq!(first.1.len(), 15);
    assert_eq!(bits(&first.0), bits(&cpu.0), "embedding backward: wgpu {:?}, cpu {:?}", first.0, cpu.0);
    assert_eq!(bits(&first.1), bits(&cpu.1), "gather backward: wgpu {:?}, cpu {:?}", first.1, cpu.1);
    eprintln!("scatter_child checked");
}

#[test]
fn a_second_backend_is_another_device() {
    let Some(shared) = wgpu_or_skip() else { return };
    let other = Device::Wgpu(Arc::new(WgpuBackend::independent().unwrap()));
    assert!(!shared.same(&other) && !other.same(&shared), "two backends must not count as one device");
    assert!(other.same(&other.clone()) && shared.same(&Device::wgpu().unwrap()));
    let a = RawTensor::from_vec(vec![1.0, 2.0, 3.0], &[3], &shared).unwrap();
    // Written through the second backend, its commands still unsubmitted.
    let b = RawTensor::from_vec(vec![10.0, 20.0, 30.0], &[3], &other).unwrap().mul_scalar(2.0).unwrap();
    match a.add(&b) {
        Err(Error::DeviceMismatch { .. }) => {}
        other => panic!("mixing backends: expected Error::DeviceMismatch, got {:?}", other.map(|t| t.to_vec())),
    }
    // Storages of one backend handed to the other's kernels directly.
    use rumus::backend::{Backend, BinaryOp};
    let layout = rumus::Layout::contiguous(&[3]);
    let Device::Wgpu(backend) = &shared else { unreachable!() };
    match backend.binary(BinaryOp::Add, a.storage(), &layout, b.storage(), &layout) {
        Err(Error::DeviceMismatch { .. }) => {}
        other => panic!("a foreign storage: expected Error::DeviceMismatch, got {:?}", other.map(|_| ())),
    }
    // Moving is explicit and sees the second backend's finished values.
    let moved = b.to_device(&shared).unwrap();
    assert_eq!(a.add(&moved).unwrap().to_vec().unwrap(), vec![21.0, 42.0, 63.0]);
}

#[test]
fn views_of_ten_unmergeable_axes_match_the_cpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    let shape = [2usize, 3, 2, 2, 3, 2, 2, 2, 3, 2];
    let numel: usize = shape.iter().product();
    let data = values(numel, 13);
    let other = values(numel, 14);
    // Every axis moves, so no two neighbours merge.
    let axes = [9usize, 7, 5, 3, 1, 8, 6, 4, 2, 0];
    let run = |d: &Device| -> Result<(Vec<f32>, Vec<f32>, Vec<u32>)> {
        let x = RawTensor::from_vec(data.clone(), &shape, d)?.permute(&axes)?;
        let y = RawTensor::from_vec(other.clone(), &shape, d)?.permute(&[1, 0, 3, 2, 5, 4, 7, 6, 9, 8])?;
        // Flattening a view copies it (the strided copy kernel); the add then runs contiguous.
        let sum = x.reshape(&[numel])?.add(&y.reshape(&[numel])?)?;
        // Two rank-10 views straight into a binary op.
        let z = RawTensor::from_vec(other.clone(), &shape, d)?.permute(&axes)?;
        let strided_sum = x.add(&z)?;
        let ids = RawTensor::from_indices(&(0..numel as u32).collect::<Vec<_>>(), &shape, d)?.permute(&axes)?;
        Ok((sum.to_vec()?, strided_sum.to_vec()?, ids.contiguous()?.to_vec_u32()?))
    };
    let (cpu, wgpu) = (run(&Device::cpu()).unwrap(), run(&gpu).unwrap());
    assert_eq!(wgpu.0, cpu.0, "contiguous copies of rank-10 views");
    assert_eq!(wgpu.1, cpu.1, "a binary op on two rank-10 views");
    assert_eq!(wgpu.2, cpu.2, "a u32 rank-10 view");
}

/// Run in a child process by `a_headless_start_prints_nothing`: opens the wgpu device.
#[test]
fn headless_child() {
    if !in_child() {
        return;
    }
    if let Some(d) = wgpu_or_skip() {
        let x = RawTensor::from_vec(vec![1.0, 2.0], &[2], &d).unwrap();
        assert_eq!(x.mul_scalar(3.0).unwrap().to_vec().unwrap(), vec![3.0, 6.0]);
    }
    let _ = Device::best();
    eprintln!("headless_child checked");
}

#[test]
fn a_headless_start_prints_nothing() {
    if wgpu_or_skip().is_none() {
        return;
    }
    let stderr = run_child(&test_path(module_path!(), "headless_child"), &[("XDG_RUNTIME_DIR", None)]);
    assert!(stderr.contains("headless_child checked"), "the child did not run its checks: {stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "a headless start printed: {stderr}");
}

#[test]
fn index_checks_make_no_transfer_for_indices_the_host_vouches_for() {
    if wgpu_or_skip().is_none() {
        return;
    }
    // In a process of its own: the transfer counter is process-wide.
    let stderr = run_child(&test_path(module_path!(), "transfer_child"), &[]);
    assert!(stderr.contains("transfer_child checked"), "the child did not run its checks: {stderr}");
}

#[test]
fn transfer_child() -> Result<()> {
    if !in_child() {
        return Ok(());
    }
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let table = RawTensor::from_vec(values(10 * 4, 1), &[10, 4], &gpu)?.requires_grad_()?;
    let ids = RawTensor::from_indices(&[1, 3, 3, 9, 0, 3], &[6], &gpu)?;
    let targets = RawTensor::from_indices(&[0, 1, 2, 3, 1, 0], &[6], &gpu)?;
    let before = transfer_count();
    // Uploaded indices in range: embedding, cross-entropy, nll_loss (gather) and their backward.
    let logits = ids.embedding(&table)?;
    let loss = logits.cross_entropy(&targets, 0.0)?.add(&logits.log_softmax(-1)?.nll_loss(&targets)?)?;
    let grads = loss.backward()?;
    // Indices a kernel computed whose range the backend knows: argmax over 4 columns.
    let argmax_loss = logits.cross_entropy(&logits.argmax(1)?, 0.0)?;
    assert_eq!(transfer_count(), before, "index checks of vouched indices read back");
    // A view whose storage holds a value past the limit: the flag is read, once.
    let view = RawTensor::from_indices(&[2, 0, 7], &[3], &gpu)?.narrow(0, 0, 2)?;
    let picked = table.index_select(0, &view)?.index_select(1, &view)?;
    assert_eq!(transfer_count(), before + 1, "an unvouched index check reads its flag once");
    let want = [table.to_vec()?[2 * 4 + 2], table.to_vec()?[2 * 4], table.to_vec()?[2], table.to_vec()?[0]];
    assert_eq!(picked.to_vec()?, want);
    assert!(loss.item()?.is_finite() && argmax_loss.item()?.is_finite());
    assert!(grads.get(&table).is_some());
    eprintln!("transfer_child checked");
    Ok(())
}

/// Label-smoothed cross-entropy sums the gaps to the row maximum, not the raw logits, so equal
/// huge logits give exactly log(classes) on both kernels (few classes: one invocation per row;
/// many: a workgroup per row), as on the CPU.
#[test]
fn smoothed_cross_entropy_is_exact_at_huge_logits_on_the_gpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    for classes in [10usize, 3000] {
        let targets = RawTensor::from_indices(&[3, 7], &[2], &gpu).unwrap();
        for value in [1e30f32, -1e30, 3e38] {
            let logits = RawTensor::full(value, &[2, classes], &gpu).unwrap();
            for s in [0.0, 0.1, 0.9] {
                let loss = logits.cross_entropy(&targets, s).unwrap().item().unwrap();
                let exact = (classes as f32).ln();
                assert!((loss - exact).abs() < 1e-4 * exact, "{classes} classes, logits {value}, s {s}: {loss}");
            }
        }
    }
}
