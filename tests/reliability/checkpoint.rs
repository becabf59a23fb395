//! Bad checkpoints and failed saves: every case is an exact `rumus::Error`, the model is left
//! unchanged by a failed load, and a failed save leaves the previous file intact.
//! (tests/training/checkpoint.rs covers the combined strict-load report, garbage/truncated bytes and a
//! failing writer.)

use crate::common;

use std::path::Path;

use common::{scratch, weights, LeNet};
use rumus::io::{load_module, load_optimizer, module_from_bytes, save_module, save_optimizer};
use rumus::nn::{named_params, Linear, Module, Relu, Sequential};
use rumus::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

fn mlp(seed: u64) -> Sequential {
    let d = Device::cpu();
    Sequential::new()
        .with(Linear::new(&d, 8, 16, true, seed).unwrap())
        .with(Relu)
        .with(Linear::new(&d, 16, 4, true, seed + 1).unwrap())
}

/// The model's tensors as a file, after `edit` changed the (name, dtype, shape, bytes) list.
fn edited(model: &dyn Module, edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) -> Vec<u8> {
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = named_params(model)
        .into_iter()
        .map(|(n, p)| {
            let bytes = p.to_vec().unwrap().iter().flat_map(|v| v.to_le_bytes()).collect();
            (n, Dtype::F32, p.shape().to_vec(), bytes)
        })
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, TensorView<'_>)> =
        tensors.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(views, None).unwrap()
}

/// Loads `bytes` from a file into a fresh model and expects a Checkpoint error containing
/// `needle`; the model must be unchanged.
fn rejected(what: &str, bytes: &[u8], needle: &str) {
    let dir = scratch(&format!("ckpt_{}", what.replace(' ', "_")));
    let path = dir.join("m.safetensors");
    std::fs::write(&path, bytes).unwrap();
    let model = mlp(7);
    let before = weights(&model);
    match load_module(&model, &path) {
        Err(Error::Checkpoint { path: p, detail }) => {
            assert_eq!(p, path, "{what}");
            assert!(detail.contains(needle), "{what}: {detail:?} should contain {needle:?}");
        }
        other => panic!("{what}: expected a Checkpoint error, got {other:?}"),
    }
    assert_eq!(weights(&model), before, "{what}: a failed load must not change the model");
}

#[test]
fn files_that_are_not_checkpoints_are_rejected() {
    let idx: Vec<u8> = [vec![0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28], vec![0; 784]].concat();
    rejected("idx file", &idx, "not a valid safetensors file");
    let mut rng = rumus::rng::Rng::new(3);
    let random: Vec<u8> = (0..4096).map(|_| (rng.uniform() * 256.0) as u8).collect();
    rejected("random bytes", &random, "not a valid safetensors file");
    rejected("json only", br#"{"a": 1}"#, "not a valid safetensors file");
    // A header length pointing past the end of the file, and one that is valid JSON of the wrong kind.
    let mut lying = 1000u64.to_le_bytes().to_vec();
    lying.extend(b"{}");
    rejected("header past end", &lying, "not a valid safetensors file");
    let header = br#"{"0.weight": {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 999999]}}"#;
    let mut bad_offsets = (header.len() as u64).to_le_bytes().to_vec();
    bad_offsets.extend(header);
    rejected("data offsets past end", &bad_offsets, "not a valid safetensors file");
    // A folder where the file should be is an Io error.
    let dir = scratch("ckpt_folder");
    assert!(matches!(load_module(&mlp(1), &dir), Err(Error::Io { .. })));
}

#[test]
fn truncated_checkpoints_are_rejected_at_every_length() {
    let good = edited(&mlp(1), |_| {});
    let model = mlp(7);
    let before = weights(&model);
    for len in (0..good.len()).step_by(37).chain([good.len() - 1]) {
        let err = module_from_bytes(&model, &good[..len], Path::new("cut.safetensors")).unwrap_err();
        assert!(matches!(err, Error::Checkpoint { .. }), "cut at {len}: {err}");
    }
    assert_eq!(weights(&model), before);
}

#[test]
fn each_kind_of_mismatch_alone_is_a_checkpoint_error() {
    let m = mlp(1);
    rejected("missing", &edited(&m, |t| t.retain(|x| x.0 != "0.weight")), "missing keys: 0.weight");
    rejected(
        "extra",
        &edited(&m, |t| t.push(("3.weight".into(), Dtype::F32, vec![1], vec![0; 4]))),
        "unexpected keys: 3.weight",
    );
    rejected(
        "transposed",
        &edited(&m, |t| t.iter_mut().filter(|x| x.0 == "0.weight").for_each(|x| x.2 = vec![8, 16])),
        "0.weight: shape [8, 16] in file, [16, 8] in model",
    );
    rejected(
        "rank",
        &edited(&m, |t| t.iter_mut().filter(|x| x.0 == "2.bias").for_each(|x| x.2 = vec![1, 4])),
        "2.bias: shape [1, 4] in file, [4] in model",
    );
    for (dtype, width) in [(Dtype::F16, 2), (Dtype::BF16, 2), (Dtype::F64, 8), (Dtype::I32, 4), (Dtype::I64, 8)] {
        let bytes = edited(&m, |t| {
            for x in t.iter_mut().filter(|x| x.0 == "2.bias") {
                x.1 = dtype;
                x.3 = vec![0; 4 * width];
            }
        });
        rejected(&format!("dtype {dtype:?}"), &bytes, &format!("2.bias: dtype {dtype:?}, expected F32"));
    }
    // I64 is only skipped for PyTorch's num_batches_tracked.
    rejected(
        "i64 buffer",
        &edited(&m, |t| t.push(("0.running_mean".into(), Dtype::I64, vec![], vec![0; 8]))),
        "unexpected keys: 0.running_mean",
    );
    // Another model's checkpoint.
    let lenet = edited(&LeNet::new(1).unwrap(), |_| {});
    rejected(
        "another model",
        &lenet,
        "missing keys: 0.weight, 0.bias, 2.weight, 2.bias | unexpected keys: features.0.bias",
    );
    // An empty checkpoint: every key missing.
    rejected("no tensors", &edited(&m, |t| t.clear()), "missing keys");
}

#[test]
fn optimizer_state_files_are_checked_too() -> Result<()> {
    let dir = scratch("ckpt_optimizer");
    let model = mlp(1);
    let params = named_params(&model);
    // Not a checkpoint at all.
    std::fs::write(dir.join("junk.safetensors"), b"not safetensors").unwrap();
    let err = load_optimizer(&mut Adam::new(0.1), &params, dir.join("junk.safetensors")).unwrap_err();
    assert!(matches!(err, Error::Checkpoint { .. }), "{err}");
    // A model checkpoint given as optimizer state.
    save_module(&model, dir.join("model.safetensors"))?;
    let err = load_optimizer(&mut Adam::new(0.1), &params, dir.join("model.safetensors")).unwrap_err();
    assert!(matches!(err, Error::Checkpoint { .. }), "{err}");
    // A model file given as a model works; an optimizer file given as a model does not.
    let mut opt = Adam::new(0.1);
    let x = RawTensor::ones(&[2, 8], &Device::cpu())?;
    opt.step(&params, &model.forward_raw(&x)?.sum_all()?.backward()?)?;
    save_optimizer(&opt, dir.join("adam.safetensors"))?;
    let err = load_module(&model, dir.join("adam.safetensors")).unwrap_err();
    assert!(matches!(err, Error::Checkpoint { .. }), "{err}");
    assert!(matches!(load_optimizer(&mut Adam::new(0.1), &params, dir.join("none")), Err(Error::Io { .. })));
    Ok(())
}

#[test]
fn a_save_that_fails_leaves_the_previous_file_intact() -> Result<()> {
    let dir = scratch("ckpt_failed_saves");
    let path = dir.join("m.safetensors");
    let model = mlp(1);
    save_module(&model, &path)?;
    let original = std::fs::read(&path).unwrap();
    let intact = || {
        assert_eq!(std::fs::read(&path).unwrap(), original, "the previous checkpoint must be intact");
        let reloaded = mlp(50);
        load_module(&reloaded, &path).unwrap();
        assert_eq!(weights(&reloaded), weights(&model));
    };

    // The disk fills up mid-write (ENOSPC after some bytes).
    let err = rumus::io::write_atomic_with(&path, |file| {
        std::io::Write::write_all(file, b"half a checkpoint")?;
        Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
    })
    .unwrap_err();
    match &err {
        Error::Io { path: p, source } => {
            assert_eq!(p, &path);
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{err}");
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    intact();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the temporary file is removed");

    // A read-only folder (only enforced for non-root users; root writes anyway).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let enforced = std::fs::write(dir.join("probe"), b"x").is_err();
        if enforced {
            assert!(matches!(save_module(&mlp(3), &path), Err(Error::Io { .. })));
        } else {
            let _ = std::fs::remove_file(dir.join("probe"));
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        intact();
    }

    // The target is a folder: the rename fails, the folder and its contents stay.
    let folder = dir.join("folder.safetensors");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("keep"), b"keep").unwrap();
    assert!(matches!(save_module(&model, &folder), Err(Error::Io { .. })));
    assert_eq!(std::fs::read(folder.join("keep")).unwrap(), b"keep");
    let mut left: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["folder.safetensors", "m.safetensors"], "the temporary file is removed");
    // No file name at all, and a missing parent folder.
    assert!(matches!(save_module(&model, "/"), Err(Error::InvalidArgument { op: "save", .. })));
    assert!(matches!(save_module(&model, dir.join("absent/m.safetensors")), Err(Error::Io { .. })));
    intact();
    // A good save afterwards replaces the file.
    save_module(&mlp(4), &path)?;
    assert_ne!(std::fs::read(&path).unwrap(), original);
    Ok(())
}
