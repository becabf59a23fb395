//! Safetensors checkpoints: round trips, strict loading, corrupt files, atomic saves, optimizer
//! state for resuming, and PyTorch interchange.

use crate::common;

use std::path::Path;

use common::{scratch, weights, LinReg};
use rumus::io::{load_module, load_optimizer, module_from_bytes, save_module, save_optimizer, write_atomic_with};
use rumus::nn::{named_params, Linear, Module, Relu, Sequential};
use rumus::optim::Optimizer;
use rumus::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

/// The names of the files in `dir`, sorted (temporary files are hidden `.<name>.….tmp` ones).
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn mlp(seed: u64) -> Sequential {
    let d = Device::cpu();
    Sequential::new()
        .with(Linear::new(&d, 8, 16, true, seed).unwrap())
        .with(Relu)
        .with(Linear::new(&d, 16, 4, true, seed + 1).unwrap())
}

fn input() -> RawTensor {
    RawTensor::randn(&[3, 8], 0.0, 1.0, 5, &Device::cpu()).unwrap()
}

/// A safetensors file holding `tensors` (name, dtype, shape, little-endian bytes).
fn file_with(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> =
        tensors.iter().map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(views, None).unwrap()
}

fn f32_bytes(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect()
}

/// The model's own tensors as (name, F32, shape, bytes).
fn model_tensors(m: &dyn Module) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    named_params(m).into_iter().map(|(n, p)| (n, p.shape().to_vec(), f32_bytes(p.tensor().numel()))).collect()
}

fn checkpoint_detail(result: Result<()>) -> String {
    match result {
        Err(Error::Checkpoint { detail, .. }) => detail,
        other => panic!("expected a Checkpoint error, got {other:?}"),
    }
}

#[test]
fn save_then_load_gives_identical_outputs() -> Result<()> {
    let dir = scratch("roundtrip");
    let path = dir.join("mlp.safetensors");
    let a = mlp(1);
    save_module(&a, &path)?;
    let b = mlp(100);
    assert_ne!(a.forward_raw(&input())?.to_vec()?, b.forward_raw(&input())?.to_vec()?);
    load_module(&b, &path)?;
    assert_eq!(a.forward_raw(&input())?.to_vec()?, b.forward_raw(&input())?.to_vec()?);
    assert_eq!(files_in(&dir), ["mlp.safetensors"], "no temporary file is left behind");
    // PyTorch's names and layouts: nn.Sequential indices, weight [out, in].
    let bytes = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = file.names();
    names.sort();
    assert_eq!(names, ["0.bias", "0.weight", "2.bias", "2.weight"]);
    assert_eq!(file.tensor("0.weight").unwrap().shape(), [16, 8]);
    Ok(())
}

#[test]
fn model_save_and_load_methods_round_trip() -> Result<()> {
    let dir = scratch("model_methods");
    let a = LinReg::new(1)?;
    a.save(dir.join("m.safetensors"))?;
    let mut b = LinReg::new(2)?;
    b.load(dir.join("m.safetensors"))?;
    assert_eq!(weights(&a), weights(&b));
    Ok(())
}

#[test]
fn strict_load_lists_missing_unexpected_misshaped_and_wrong_dtype_keys() {
    let model = mlp(1);
    let before = weights(&model);
    let mut tensors = model_tensors(&model);
    tensors.retain(|(n, _, _)| n != "2.bias"); // missing
    tensors.push(("extra.weight".into(), vec![2], f32_bytes(2))); // unexpected
    for t in tensors.iter_mut().filter(|t| t.0 == "0.bias") {
        *t = ("0.bias".into(), vec![15], f32_bytes(15)); // mis-shaped
    }
    let mut with_dtype: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, s, b)| (n.as_str(), Dtype::F32, s.clone(), b.clone())).collect();
    for t in with_dtype.iter_mut().filter(|t| t.0 == "2.weight") {
        *t = ("2.weight", Dtype::F64, vec![4, 16], vec![0; 4 * 16 * 8]); // wrong dtype
    }
    let detail = checkpoint_detail(module_from_bytes(&model, &file_with(&with_dtype), Path::new("bad.safetensors")));
    assert!(detail.contains("missing keys: 2.bias"), "{detail}");
    assert!(detail.contains("unexpected keys: extra.weight"), "{detail}");
    assert!(detail.contains("0.bias: shape [15] in file, [16] in model"), "{detail}");
    assert!(detail.contains("2.weight: dtype F64"), "{detail}");
    assert_eq!(weights(&model), before, "a failed load must not change the model");
}

#[test]
fn pytorch_num_batches_tracked_buffers_are_skipped() -> Result<()> {
    let model = mlp(1);
    let tensors = model_tensors(&model);
    let mut all: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, s, b)| (n.as_str(), Dtype::F32, s.clone(), b.clone())).collect();
    all.push(("1.num_batches_tracked", Dtype::I64, vec![], 7i64.to_le_bytes().to_vec()));
    module_from_bytes(&model, &file_with(&all), Path::new("torch.safetensors"))?;
    assert_eq!(model.layers().len(), 3);
    let w = weights(&model);
    assert_eq!(w[0].1[1], 0.01);
    Ok(())
}

#[test]
fn corrupt_and_truncated_checkpoints_are_errors_not_panics() -> Result<()> {
    let dir = scratch("corrupt");
    let path = dir.join("m.safetensors");
    let model = mlp(1);
    save_module(&model, &path)?;
    let bytes = std::fs::read(&path).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("truncated header", bytes[..6].to_vec()),
        ("truncated data", bytes[..bytes.len() - 10].to_vec()),
        ("garbage", (0..500u32).map(|i| (i * 7919 % 251) as u8).collect()),
        ("huge header length", [u64::MAX.to_le_bytes().to_vec(), b"{}".to_vec()].concat()),
    ];
    for (what, data) in cases {
        std::fs::write(&path, data).unwrap();
        let err = load_module(&model, &path).unwrap_err();
        assert!(matches!(err, Error::Checkpoint { .. }), "{what}: {err}");
        assert!(err.to_string().contains("m.safetensors"), "{what}: {err}");
    }
    assert!(matches!(load_module(&model, dir.join("absent.safetensors")), Err(Error::Io { .. })));
    Ok(())
}

#[test]
fn a_failed_save_leaves_the_previous_file_intact() -> Result<()> {
    let dir = scratch("atomic");
    let path = dir.join("m.safetensors");
    let model = mlp(1);
    save_module(&model, &path)?;
    let original = std::fs::read(&path).unwrap();

    // A writer that fails half-way.
    let err = write_atomic_with(&path, |file| {
        use std::io::Write;
        file.write_all(b"partial")?;
        Err(std::io::Error::other("disk full (simulated)"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert_eq!(files_in(&dir), ["m.safetensors"], "the partial temporary file is removed");

    // The temporary file cannot be created: the folder is gone.
    let gone = dir.join("gone");
    assert!(save_module(&mlp(2), gone.join("m.safetensors")).is_err());
    assert!(!gone.exists());
    // A folder (or a user's file) named like the old fixed temporary name is not in the way.
    std::fs::create_dir(dir.join("m.safetensors.tmp")).unwrap();
    save_module(&model, &path)?;
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert!(dir.join("m.safetensors.tmp").is_dir());
    let reloaded = mlp(3);
    load_module(&reloaded, &path)?;
    assert_eq!(weights(&reloaded), weights(&model));
    Ok(())
}

#[test]
fn optimizer_state_round_trips_so_training_resumes_identically() -> Result<()> {
    let dir = scratch("optimizer_state");
    let data = common::regression_data(64, 3)?;
    // Reference: one uninterrupted run of 4 manual Adam steps.
    let run_steps = |model: &LinReg, opt: &mut dyn Optimizer, steps: std::ops::Range<usize>| -> Result<()> {
        let params = named_params(model);
        for s in steps {
            let idx: Vec<usize> = (s * 16..(s + 1) * 16).collect();
            let (x, y) = data.get_batch(&idx, &Device::cpu())?;
            let loss = Loss::Mse.compute(&model.forward_raw(x.raw())?, &y)?;
            opt.step(&params, &loss.backward()?)?;
        }
        Ok(())
    };
    let full = LinReg::new(1)?;
    let mut opt = Adam::new(0.05);
    run_steps(&full, &mut opt, 0..4)?;

    // Interrupted: 2 steps, save model + optimizer, fresh objects, load, 2 more steps.
    let first = LinReg::new(1)?;
    let mut opt = Adam::new(0.05);
    run_steps(&first, &mut opt, 0..2)?;
    first.save(dir.join("model.safetensors"))?;
    save_optimizer(&opt, dir.join("adam.safetensors"))?;
    let mut resumed = LinReg::new(50)?;
    resumed.load(dir.join("model.safetensors"))?;
    let mut opt2 = Adam::new(999.0);
    load_optimizer(&mut opt2, &named_params(&resumed), dir.join("adam.safetensors"))?;
    assert_eq!(opt2.learning_rate(), 0.05);
    run_steps(&resumed, &mut opt2, 2..4)?;
    assert_eq!(weights(&resumed), weights(&full));

    // Loading into another optimizer kind, or for another model, is an error.
    let mut sgd = Sgd::new(0.1);
    assert!(load_optimizer(&mut sgd, &named_params(&resumed), dir.join("adam.safetensors")).is_err());
    let other = mlp(1);
    assert!(load_optimizer(&mut Adam::new(0.1), &named_params(&other), dir.join("adam.safetensors")).is_err());
    Ok(())
}

/// Loads `<name>.safetensors` into `model` and checks its logits on `<name>_io.safetensors`'s
/// input against PyTorch's. Skips loudly when the fixture has not been generated.
fn check_torch_fixture(name: &str, model: &dyn Module) -> Result<()> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (weights_file, io_file) =
        (here.join(format!("{name}.safetensors")), here.join(format!("{name}_io.safetensors")));
    if !weights_file.exists() || !io_file.exists() {
        common::skip_loudly(
            &format!("PyTorch interchange check {name}"),
            &format!(
                "{} is absent; generate it with `python3 tests/fixtures/make_torch_fixture.py` on a machine with \
                 PyTorch and commit the files",
                weights_file.display()
            ),
        );
        return Ok(());
    }
    load_module(model, &weights_file)?;
    let bytes = std::fs::read(&io_file).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let read = |name: &str| -> (Vec<usize>, Vec<f32>) {
        let t = io.tensor(name).unwrap();
        (t.shape().to_vec(), t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    };
    let (x_shape, x) = read("input");
    let (_, expected) = read("logits");
    let got = model.forward_raw(&RawTensor::from_vec(x, &x_shape, &Device::cpu())?)?.to_vec()?;
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-4 * e.abs().max(1.0), "{name}: rumus {got:?} vs PyTorch {expected:?}");
    }
    Ok(())
}

#[test]
fn pytorch_mlp_weights_give_pytorchs_logits() -> Result<()> {
    check_torch_fixture("torch_mlp", &mlp(1))
}

#[test]
fn pytorch_lenet_weights_give_pytorchs_logits() -> Result<()> {
    check_torch_fixture("torch_lenet", &common::LeNet::new(1)?)
}

#[test]
fn lenet_checkpoints_use_pytorchs_names_and_layouts() -> Result<()> {
    let dir = scratch("lenet_names");
    let model = common::LeNet::new(1)?;
    model.save(dir.join("lenet.safetensors"))?;
    let bytes = std::fs::read(dir.join("lenet.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<(String, Vec<usize>)> =
        file.tensors().into_iter().map(|(n, t)| (n, t.shape().to_vec())).collect();
    names.sort();
    let expected: Vec<(String, Vec<usize>)> = [
        ("features.0.bias", vec![6]),
        ("features.0.weight", vec![6, 1, 5, 5]),
        ("features.3.bias", vec![16]),
        ("features.3.weight", vec![16, 6, 5, 5]),
        ("head.1.bias", vec![120]),
        ("head.1.weight", vec![120, 400]),
        ("head.3.bias", vec![84]),
        ("head.3.weight", vec![84, 120]),
        ("head.5.bias", vec![10]),
        ("head.5.weight", vec![10, 84]),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    assert_eq!(names, expected);
    let x = RawTensor::randn(&[2, 1, 28, 28], 0.0, 1.0, 3, &Device::cpu())?;
    let mut other = common::LeNet::new(77)?;
    other.load(dir.join("lenet.safetensors"))?;
    assert_eq!(model.forward_raw(&x)?.to_vec()?, other.forward_raw(&x)?.to_vec()?);
    Ok(())
}
