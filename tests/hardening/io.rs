//! Hardening of files rumus reads and writes (issue #27): concurrent atomic saves, decompression
//! bombs in IDX files, and untrusted optimizer state.

use crate::common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use proptest::prelude::*;
use rumus::data::parse_idx;
use rumus::io::{load_module, load_optimizer, save_module, save_optimizer};
use rumus::nn::{named_params, Linear, Module};
use rumus::prelude::*;

use common::scratch;

// ---------------------------------------------------------------------------------------------
// The largest single allocation made by this thread while tracking is on.

struct Tracking;

thread_local! {
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| {
        if let Some(m) = l.get() {
            l.set(Some(m.max(size)));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `alloc`; `ptr` and `layout` describe a block of `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(Some(0)));
    let out = f();
    let largest = LARGEST.with(|l| l.replace(None)).unwrap_or(0);
    (out, largest)
}

// ---------------------------------------------------------------------------------------------
// #6: concurrent saves to one path.

fn linear(seed: u64) -> Linear {
    Linear::new(&Device::cpu(), 16, 8, true, seed).unwrap()
}

fn values(m: &dyn Module) -> Vec<Vec<f32>> {
    named_params(m).iter().map(|(_, p)| p.to_vec().unwrap()).collect()
}

#[test]
fn concurrent_saves_to_one_path_always_leave_one_whole_model() {
    let dir = scratch("hardening_concurrent_saves");
    let path = dir.join("model.safetensors");
    // A user's own file with the name the old code used for its temporary file.
    let user_tmp = dir.join("model.safetensors.tmp");
    std::fs::write(&user_tmp, b"precious").unwrap();
    let models: Vec<Linear> = (0..8).map(linear).collect();
    let expected: Vec<Vec<Vec<f32>>> = models.iter().map(|m| values(m)).collect();
    save_module(&models[0], &path).unwrap();
    std::thread::scope(|s| {
        for model in &models {
            let path = &path;
            s.spawn(move || {
                for _ in 0..25 {
                    save_module(model, path).unwrap();
                }
            });
        }
        for _ in 0..2 {
            let (path, expected) = (&path, &expected);
            s.spawn(move || {
                let reader = linear(99);
                for _ in 0..100 {
                    load_module(&reader, path).expect("a reader saw a torn checkpoint");
                    assert!(expected.contains(&values(&reader)), "a reader loaded a model nobody saved");
                }
            });
        }
    });
    let reader = linear(99);
    load_module(&reader, &path).unwrap();
    assert!(expected.contains(&values(&reader)));
    assert_eq!(std::fs::read(&user_tmp).unwrap(), b"precious", "the user's .tmp file was overwritten");
    let mut left: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["model.safetensors", "model.safetensors.tmp"], "temporary files were left behind");
}

#[test]
fn a_file_name_near_the_length_limit_saves() {
    let dir = scratch("hardening_long_name");
    for len in [250, 255] {
        let name = format!("{}.safetensors", "m".repeat(len - ".safetensors".len()));
        assert_eq!(name.len(), len);
        let model = linear(3);
        save_module(&model, dir.join(&name)).unwrap_or_else(|e| panic!("{len}-byte name: {e}"));
        let back = linear(4);
        load_module(&back, dir.join(&name)).unwrap();
        assert_eq!(values(&back), values(&model));
    }
}

/// `bytes` (safetensors) with the values of `key` replaced.
fn with_values(bytes: &[u8], key: &str, values: &[f32]) -> Vec<u8> {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(n, v)| {
            let data = if n == key { values.iter().flat_map(|v| v.to_le_bytes()).collect() } else { v.data().to_vec() };
            (n, v.shape().to_vec(), data)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, d)| {
            (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap())
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn a_checkpoint_with_non_finite_values_or_a_negative_variance_is_refused() {
    let bn = rumus::nn::BatchNorm1d::new(&Device::cpu(), 2, 1e-5, 0.1).unwrap();
    let good = rumus::io::module_to_bytes(&bn).unwrap();
    let before = values(&bn);
    for (key, bad, needle) in [
        ("weight", vec![f32::NAN, 1.0], "weight[0] = NaN"),
        ("bias", vec![0.0, f32::INFINITY], "bias[1] = inf"),
        ("running_mean", vec![f32::NEG_INFINITY, 0.0], "running_mean[0] = -inf"),
        ("running_var", vec![1.0, -0.5], "running_var[1] = -0.5"),
    ] {
        let bytes = with_values(&good, key, &bad);
        let err = rumus::io::module_from_bytes(&bn, &bytes, Path::new("bad.safetensors")).unwrap_err();
        assert!(matches!(err, Error::Checkpoint { .. }) && err.to_string().contains(needle), "{key}: {err}");
        assert_eq!(values(&bn), before, "{key}: the module changed");
    }
    rumus::io::module_from_bytes(&bn, &with_values(&good, "running_var", &[0.0, 2.0]), Path::new("ok")).unwrap();
}

// ---------------------------------------------------------------------------------------------
// #7: decompression bombs.

fn gzip(chunks: &[&[u8]], zeros: usize) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    for c in chunks {
        enc.write_all(c).unwrap();
    }
    let block = vec![0u8; 1 << 20];
    let mut left = zeros;
    while left > 0 {
        let n = left.min(block.len());
        enc.write_all(&block[..n]).unwrap();
        left -= n;
    }
    enc.finish().unwrap()
}

/// Generous room for the decoder's own buffers and the read chunk.
const OVERHEAD: usize = 256 << 10;

#[test]
fn a_gzip_bomb_behind_a_three_label_header_fails_without_inflating() {
    let header = [0u8, 0, 8, 1, 0, 0, 0, 3];
    let bomb = gzip(&[&header, &[1, 2, 3]], 256 << 20);
    assert!(bomb.len() < 1 << 20, "the bomb should be small: {} bytes", bomb.len());
    let (result, largest) = largest_allocation(|| parse_idx(&bomb, Path::new("bomb.gz")));
    let err = result.unwrap_err();
    assert!(matches!(err, Error::Format { .. }) && err.to_string().contains("trailing"), "{err}");
    assert!(largest < OVERHEAD, "parsing the bomb allocated {largest} bytes at once");

    // Through a file too, as MNIST loading reads it.
    let dir = scratch("hardening_bomb");
    let file = dir.join("train-labels-idx1-ubyte.gz");
    std::fs::write(&file, &bomb).unwrap();
    let (result, largest) = largest_allocation(|| rumus::data::read_idx(&file));
    assert!(result.unwrap_err().to_string().contains("trailing"));
    assert!(largest < OVERHEAD, "reading the bomb allocated {largest} bytes at once");

    // The same header with exactly its three labels is fine.
    let good = gzip(&[&header, &[1, 2, 3]], 0);
    assert_eq!(parse_idx(&good, Path::new("ok.gz")).unwrap().data, [1, 2, 3]);
}

fn idx(dims: &[u32], body: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// The data size the header of `bytes` (raw IDX) declares, if it has one.
fn declared(bytes: &[u8]) -> Option<usize> {
    let rank = *bytes.get(3)? as usize;
    let dims = bytes.get(4..4 + 4 * rank)?;
    dims.chunks_exact(4)
        .try_fold(1usize, |acc, c| acc.checked_mul(u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn the_idx_reader_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600), gz in any::<bool>()) {
        let input = if gz { gzip(&[&bytes], 0) } else { bytes.clone() };
        let (result, largest) = largest_allocation(|| parse_idx(&input, Path::new("x")));
        if let Ok(a) = &result {
            prop_assert_eq!(a.data.len(), a.dims.iter().product::<usize>());
            prop_assert_eq!(idx(&a.dims.iter().map(|&d| d as u32).collect::<Vec<_>>(), &a.data), bytes.clone());
        }
        let limit = declared(&bytes).unwrap_or(0).min(bytes.len()).max(input.len());
        prop_assert!(largest <= limit + OVERHEAD, "allocated {} for {} input bytes", largest, input.len());
    }

    #[test]
    fn the_idx_reader_accepts_exactly_the_declared_size(
        dims in proptest::collection::vec(0u32..6, 1..4),
        extra in -3i64..3,
        gz in any::<bool>(),
    ) {
        let need = dims.iter().product::<u32>() as i64;
        let len = (need + extra).max(0) as usize;
        let raw = idx(&dims, &vec![7u8; len]);
        let input = if gz { gzip(&[&raw], 0) } else { raw };
        let result = parse_idx(&input, Path::new("x"));
        prop_assert_eq!(result.is_ok(), len as i64 == need, "{:?}", result);
    }

    #[test]
    fn a_huge_declared_size_allocates_only_what_is_there(dims in proptest::collection::vec(1u32..u32::MAX, 1..4), body in 0usize..3000) {
        let input = gzip(&[&idx(&dims, &vec![1u8; body])], 0);
        let (result, largest) = largest_allocation(|| parse_idx(&input, Path::new("x")));
        let need = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d as usize));
        if need != Some(body) {
            prop_assert!(result.is_err());
        }
        prop_assert!(largest <= body + OVERHEAD, "allocated {} for {} data bytes", largest, body);
    }
}

// ---------------------------------------------------------------------------------------------
// #11: untrusted optimizer state.

/// A Linear(2 => 1) and Adam state after one step, saved to `dir/adam.safetensors`.
fn adam_after_one_step(dir: &Path) -> (Linear, Adam) {
    let model = Linear::new(&Device::cpu(), 2, 1, true, 1).unwrap();
    let mut adam = Adam::new(0.01);
    let x = RawTensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2], &Device::cpu()).unwrap();
    let grads = model.forward_raw(&x).unwrap().sum_all().unwrap().backward().unwrap();
    adam.step(&named_params(&model), &grads).unwrap();
    save_optimizer(&adam, dir.join("adam.safetensors")).unwrap();
    (model, adam)
}

/// Rewrites the saved state with `metadata` overrides and `buffers` value overrides.
fn tamper(dir: &Path, name: &str, metadata: &[(&str, &str)], buffers: &[(&str, Vec<f32>)]) -> std::path::PathBuf {
    let bytes = std::fs::read(dir.join("adam.safetensors")).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut meta: HashMap<String, String> = header.metadata().clone().unwrap();
    for (k, v) in metadata {
        meta.insert(k.to_string(), v.to_string());
    }
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(n, v)| {
            let data = match buffers.iter().find(|(b, _)| *b == n) {
                Some((_, values)) => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                None => v.data().to_vec(),
            };
            (n, v.shape().to_vec(), data)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, d)| {
            (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap())
        })
        .collect();
    let out = dir.join(name);
    std::fs::write(&out, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
    out
}

/// Metadata overrides and buffer overrides of one hostile state file.
type Metadata<'a> = Vec<(&'a str, &'a str)>;
type Buffers<'a> = Vec<(&'a str, Vec<f32>)>;

#[test]
fn hostile_optimizer_state_is_refused_by_field_and_leaves_the_optimizer_unchanged() {
    let dir = scratch("hardening_optimizer_state");
    let (model, _) = adam_after_one_step(&dir);
    let params = named_params(&model);
    let max = u64::MAX.to_string();
    let steps_max = format!(r#"{{"weight": {max}, "bias": 1}}"#);
    let steps_zero = r#"{"weight": 0, "bias": 1}"#.to_string();
    let cases: Vec<(&str, Metadata, Buffers, &str)> = vec![
        ("steps_max", vec![("steps", steps_max.as_str())], vec![], max.as_str()),
        ("steps_zero", vec![("steps", steps_zero.as_str())], vec![], "steps of `weight` = 0"),
        ("lr_nan", vec![("learning_rate", "NaN")], vec![], "learning_rate = NaN"),
        ("lr_inf", vec![("learning_rate", "inf")], vec![], "learning_rate = inf"),
        ("lr_negative", vec![("learning_rate", "-1")], vec![], "learning_rate = -1"),
        ("nan_moment", vec![], vec![("state.weight.exp_avg", vec![f32::NAN, 0.0])], "weight.exp_avg`[0] = NaN"),
        ("negative_sq", vec![], vec![("state.bias.exp_avg_sq", vec![-1.0])], "bias.exp_avg_sq`[0] = -1"),
    ];
    for (name, metadata, buffers, needle) in cases {
        let path = tamper(&dir, &format!("{name}.safetensors"), &metadata, &buffers);
        let mut adam = Adam::new(0.5);
        let err = load_optimizer(&mut adam, &params, &path).unwrap_err();
        assert!(matches!(err, Error::Checkpoint { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains(needle), "{name}: {err} lacks {needle:?}");
        assert_eq!(adam.learning_rate(), 0.5, "{name}: the learning rate changed");
        assert_eq!(
            adam.state().unwrap(),
            rumus::optim::OptimizerState { optimizer: "Adam".into(), learning_rate: 0.5, ..Default::default() }
        );
    }
    // The untouched file loads.
    let mut adam = Adam::new(0.5);
    load_optimizer(&mut adam, &params, dir.join("adam.safetensors")).unwrap();
    assert_eq!(adam.learning_rate(), 0.01);
}

proptest! {
    #![proptest_config(config(48))]

    /// Whatever learning rate and step count a file holds, loading either refuses it or leaves
    /// an optimizer whose next step keeps the weights finite.
    #[test]
    fn loaded_optimizer_state_never_leads_to_a_non_finite_step(
        lr in prop_oneof![any::<f32>(), 0.0f32..1.0],
        steps in prop_oneof![any::<u64>(), 1u64..10, Just(i32::MAX as u64 - 1), Just(i32::MAX as u64), Just(u32::MAX as u64)],
    ) {
        let dir = scratch("hardening_optimizer_state_prop");
        let (model, _) = adam_after_one_step(&dir);
        let steps_json = format!(r#"{{"weight": {steps}, "bias": {steps}}}"#);
        let lr_text = lr.to_string();
        let path = tamper(&dir, "p.safetensors", &[("learning_rate", &lr_text), ("steps", &steps_json)], &[]);
        let params = named_params(&model);
        let mut adam = Adam::new(0.5);
        let valid = lr.is_finite() && lr >= 0.0 && (1..i32::MAX as u64).contains(&steps);
        let loaded = load_optimizer(&mut adam, &params, &path);
        prop_assert_eq!(loaded.is_ok(), valid, "{:?}", loaded);
        if valid {
            let x = RawTensor::from_vec(vec![1.0, 2.0], &[1, 2], &Device::cpu()).unwrap();
            let grads = model.forward_raw(&x).unwrap().sum_all().unwrap().backward().unwrap();
            adam.step(&params, &grads).unwrap();
            prop_assert!(values(&model).iter().flatten().all(|v| v.is_finite()));
        }
    }
}

/// `cases` cases, no regression files written beside the tests.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}
