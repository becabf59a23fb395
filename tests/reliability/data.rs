//! Bad data at every entry point gives one precise `rumus::Error`, never a panic and never
//! training on garbage. (tests/training/data.rs covers the IDX parser byte by byte and the loader basics.)

use crate::common;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use common::{scratch, weights, LinReg};
use rumus::data::{mnist as mnist_mod, DataLoader, Dataset};
use rumus::prelude::*;

fn idx_bytes(kind: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, kind, dims.len() as u8];
    for d in dims {
        out.extend(d.to_be_bytes());
    }
    out.extend(data);
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// An MNIST folder of `n` valid images and labels.
fn fake_mnist(dir: &Path, n: u32) {
    let img = idx_bytes(8, &[n, 28, 28], &vec![7; n as usize * 784]);
    let lab = idx_bytes(8, &[n], &vec![1; n as usize]);
    for split in ["train", "t10k"] {
        std::fs::write(dir.join(format!("{split}-images-idx3-ubyte")), &img).unwrap();
        std::fs::write(dir.join(format!("{split}-labels-idx1-ubyte")), &lab).unwrap();
    }
}

/// `mnist::load` on a folder where `file` was replaced by `bytes` fails with a Format error that
/// names `file` and contains `needle`.
fn load_with(name: &str, file: &str, bytes: &[u8], needle: &str) {
    let dir = scratch(name);
    fake_mnist(&dir, 3);
    std::fs::write(dir.join(file), bytes).unwrap();
    match mnist_mod::load(&dir) {
        Err(Error::Format { path, detail }) => {
            assert!(path.ends_with(file), "{name}: error names {path:?}, expected {file}");
            assert!(detail.contains(needle), "{name}: {detail:?} should mention {needle:?}");
        }
        other => panic!("{name}: expected a Format error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn malformed_idx_files_through_the_mnist_loader_are_format_errors() {
    let img = |dims: &[u32], n: usize| idx_bytes(8, dims, &vec![0; n]);
    load_with("idx_zero_length", "train-labels-idx1-ubyte", b"", "empty");
    load_with("idx_wrong_magic", "train-images-idx3-ubyte", &[0x50, 0x4b, 3, 4, 0, 0, 0, 0], "magic");
    load_with("idx_wrong_type", "t10k-labels-idx1-ubyte", &idx_bytes(0x0b, &[3], &[0; 6]), "element type");
    load_with("idx_truncated_header", "t10k-images-idx3-ubyte", &[0, 0, 8, 3, 0, 0, 0], "truncated");
    load_with("idx_truncated_body", "train-images-idx3-ubyte", &img(&[3, 28, 28], 3 * 784 - 1), "truncated");
    load_with("idx_trailing", "train-labels-idx1-ubyte", &idx_bytes(8, &[3], &[1, 1, 1, 1]), "trailing");
    load_with("idx_gzip_cut", "train-labels-idx1-ubyte", &gzip(&idx_bytes(8, &[3], &[1, 1, 1]))[..12], "gzip");
    load_with("idx_images_27x27", "train-images-idx3-ubyte", &img(&[3, 27, 27], 3 * 27 * 27), "[n, 28, 28]");
    load_with("idx_images_rank2", "train-images-idx3-ubyte", &img(&[3, 784], 3 * 784), "[n, 28, 28]");
    load_with("idx_labels_rank2", "t10k-labels-idx1-ubyte", &img(&[3, 1], 3), "expected labels of [n]");
    load_with("idx_more_labels", "t10k-labels-idx1-ubyte", &idx_bytes(8, &[4], &[1; 4]), "4 labels for the 3 images");
    load_with("idx_label_10", "train-labels-idx1-ubyte", &idx_bytes(8, &[3], &[1, 10, 1]), "label 10 at position 1");
    // A folder where a file is expected counts as missing: a Data error that says how to get it.
    let dir = scratch("idx_is_a_directory");
    fake_mnist(&dir, 3);
    std::fs::remove_file(dir.join("train-images-idx3-ubyte")).unwrap();
    std::fs::create_dir(dir.join("train-images-idx3-ubyte")).unwrap();
    let err = mnist_mod::load(&dir).map(|_| ()).unwrap_err();
    assert!(matches!(err, Error::Data(_)), "{err}");
    assert!(err.to_string().contains("train-images-idx3-ubyte") && err.to_string().contains("load_or_fetch"), "{err}");
}

#[test]
fn class_indices_at_or_beyond_the_class_count_are_rejected_everywhere() {
    let cpu = Device::cpu();
    // Dataset construction names the label and its position.
    let err = ClassDataset::<Shape1<1>, 10>::new(vec![0.0; 3], vec![9, 10, 0]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 10, limit: 10, position: 1, .. }), "{err}");
    // The losses check targets that bypass a dataset.
    let logits = RawTensor::zeros(&[3, 4], &cpu).unwrap();
    let targets = RawTensor::from_indices(&[0, 4, 1], &[3], &cpu).unwrap();
    let err = logits.cross_entropy(&targets, 0.0).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { op: "cross_entropy", index: 4, limit: 4, position: 1 }), "{err}");
    let err = logits.log_softmax(-1).unwrap().nll_loss(&targets).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 4, limit: 4, .. }), "{err}");
    // A custom dataset yielding an out-of-range target stops fit with that error.
    struct BadTargets;
    impl Dataset for BadTargets {
        type Sample = Shape1<4>;
        type Target = Class<3>;
        fn len(&self) -> usize {
            4
        }
        fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<Shape1<4>>, RawTensor)> {
            let x = Tensor::from_vec(vec![0.5; indices.len() * 4], device)?;
            let y: Vec<u32> = indices.iter().map(|&i| i as u32).collect(); // 3 is out of range
            Ok((x, RawTensor::from_indices(&y, &[y.len()], device)?))
        }
    }
    let mut model = Classifier::new(1).unwrap();
    let err = model.fit(&BadTargets, Fit::epochs(1).batch_size(4).no_shuffle().verbose(Verbosity::Quiet)).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 3, limit: 3, position: 3, .. }), "{err}");
}

/// `[4] → Linear → [3]` logits.
struct Classifier {
    fc: rumus::nn::Linear,
}

impl Classifier {
    fn new(seed: u64) -> Result<Self> {
        Ok(Classifier { fc: rumus::nn::Linear::new(&Device::cpu(), 4, 3, true, seed)? })
    }
}

impl Module for Classifier {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &rumus::nn::Param)) {
        self.fc.visit_params(&rumus::nn::join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "Classifier".into()
    }
}

impl Model for Classifier {
    type Input = Shape1<4>;
    type Output = Shape1<3>;
}

#[test]
fn non_finite_inputs_are_rejected_when_a_dataset_is_built() {
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut data = vec![0.5; 12];
        data[6] = bad;
        let err = ClassDataset::<Shape1<4>, 3>::new(data.clone(), vec![0, 1, 2]).unwrap_err();
        assert!(matches!(err, Error::NonFinite(_)), "{err}");
        assert!(err.to_string().contains("sample 1"), "{err}");
        let err = TensorDataset::<Shape1<4>, Shape1<1>>::new(data, vec![0.0; 3]).unwrap_err();
        assert!(matches!(err, Error::NonFinite(_)), "{err}");
        let err = TensorDataset::<Shape1<4>, Shape1<1>>::new(vec![0.0; 12], vec![0.0, bad, 0.0]).unwrap_err();
        assert!(matches!(err, Error::NonFinite(_)), "{err}");
        assert!(err.to_string().contains("target"), "{err}");
    }
}

#[test]
fn fit_on_a_dataset_that_yields_nan_ends_with_an_error_instead_of_training_on_garbage() {
    // A custom dataset (no construction-time check) whose second batch holds a NaN.
    struct NanAt;
    impl Dataset for NanAt {
        type Sample = Shape1<4>;
        type Target = Class<3>;
        fn len(&self) -> usize {
            8
        }
        fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<Shape1<4>>, RawTensor)> {
            let mut x = vec![0.25; indices.len() * 4];
            if indices.contains(&5) {
                x[1] = f32::NAN;
            }
            let y: Vec<u32> = indices.iter().map(|&i| i as u32 % 3).collect();
            Ok((Tensor::from_vec(x, device)?, RawTensor::from_indices(&y, &[y.len()], device)?))
        }
    }
    let mut model = Classifier::new(2).unwrap();
    let before = weights(&model);
    let quiet = || Fit::epochs(2).batch_size(4).no_shuffle().optimizer(Sgd::new(0.1)).verbose(Verbosity::Quiet);
    // Without any callback: a clear NonFinite error, not a history of NaN losses.
    let err = model.fit(&NanAt, quiet()).unwrap_err();
    assert!(matches!(err, Error::NonFinite(_)), "{err}");
    assert!(err.to_string().contains("loss") && err.to_string().contains("epoch 1"), "{err}");
    // With TerminateOnNaN the last good weights come back.
    let mut model = Classifier::new(2).unwrap();
    let err = model.fit(&NanAt, quiet().callback(TerminateOnNaN::new())).unwrap_err();
    assert!(matches!(err, Error::Training(_)), "{err}");
    assert_eq!(weights(&model), before);
}

#[test]
fn empty_datasets_are_data_errors() {
    let empty = ClassDataset::<Shape1<4>, 3>::new(vec![], vec![]).unwrap();
    assert_eq!(empty.len(), 0);
    let mut model = Classifier::new(3).unwrap();
    let quiet = || Fit::epochs(1).verbose(Verbosity::Quiet);
    assert!(matches!(model.fit(&empty, quiet()), Err(Error::Data(_))));
    assert!(matches!(model.evaluate(&empty), Err(Error::Data(_))));
    let full = ClassDataset::<Shape1<4>, 3>::new(vec![0.0; 8], vec![0, 1]).unwrap();
    assert!(matches!(model.fit(&full, quiet().validation(&empty)), Err(Error::Data(_))));
    // A loader over nothing yields no batch (and is not an error by itself).
    let loader = DataLoader::new(&empty, 4, &Device::cpu()).unwrap();
    assert!(loader.is_empty());
    let mut calls = 0;
    loader
        .for_each(0, |_| {
            calls += 1;
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert_eq!(calls, 0);
    let regression = TensorDataset::<Shape1<4>, Shape1<1>>::new(vec![], vec![]).unwrap();
    let mut lin = LinReg::new(1).unwrap();
    assert!(matches!(lin.fit(&regression, quiet()), Err(Error::Data(_))));
    // Samples without labels, or values that are not whole samples.
    assert!(matches!(ClassDataset::<Shape1<4>, 3>::new(vec![0.0; 4], vec![]), Err(Error::Data(_))));
    assert!(matches!(TensorDataset::<Shape1<4>, Shape1<2>>::new(vec![0.0; 4], vec![0.0]), Err(Error::Data(_))));
}

#[test]
fn batch_sizes_zero_and_beyond_the_dataset() {
    let data = ClassDataset::<Shape1<4>, 3>::new(
        (0..40).map(|v| v as f32 / 40.0).collect(),
        vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0],
    )
    .unwrap();
    let cpu = Device::cpu();
    assert!(matches!(DataLoader::new(&data, 0, &cpu), Err(Error::InvalidArgument { op: "DataLoader", .. })));
    // Larger than the dataset: one short batch.
    let loader = DataLoader::new(&data, 64, &cpu).unwrap();
    assert_eq!(loader.len(), 1);
    let batches: Vec<usize> = loader.iter(0).map(|b| b.unwrap().len()).collect();
    assert_eq!(batches, [10]);
    let mut model = Classifier::new(4).unwrap();
    let history = model.fit(&data, Fit::epochs(2).batch_size(64).verbose(Verbosity::Quiet)).unwrap();
    assert_eq!(history.epochs(), 2);
    assert!(history.get("loss").unwrap().iter().all(|l| l.is_finite()));
    // ... unless drop_last leaves nothing.
    let dropped = DataLoader::new(&data, 64, &cpu).unwrap().drop_last(true);
    assert!(dropped.is_empty());
    let err = model.fit(&data, Fit::epochs(1).batch_size(64).drop_last(true).verbose(Verbosity::Quiet)).unwrap_err();
    assert!(matches!(err, Error::Data(_)), "{err}");
    assert!(err.to_string().contains("drop_last"), "{err}");
    assert!(matches!(
        model.fit(&data, Fit::epochs(1).batch_size(0).verbose(Verbosity::Quiet)),
        Err(Error::InvalidArgument { .. })
    ));
    // Exactly the dataset size with drop_last: one full batch.
    assert_eq!(DataLoader::new(&data, 10, &cpu).unwrap().drop_last(true).len(), 1);
    // Out-of-range indices asked of a dataset directly.
    assert!(matches!(data.get_batch(&[0, 10], &cpu), Err(Error::IndexOutOfRange { index: 10, position: 1, .. })));
}

#[test]
fn runtime_shapes_that_do_not_fit_the_typed_shape_are_shape_errors() {
    let cpu = Device::cpu();
    let raw = RawTensor::zeros(&[2, 3, 4], &cpu).unwrap();
    for err in [
        Tensor::<Shape1<12>>::from_raw(raw.clone()).unwrap_err(),
        Tensor::<Shape2<4, 3>>::from_raw(raw.clone()).unwrap_err(),
        Tensor::<Shape3<1, 3, 4>>::from_raw(raw.clone()).unwrap_err(),
        Tensor::<Shape2<3, 4>>::from_raw(raw.reshape(&[24]).unwrap()).unwrap_err(),
    ] {
        assert!(matches!(err, Error::Shape { op: "Tensor::from_raw", .. }), "{err}");
    }
    let typed: Tensor<Shape2<3, 4>> = raw.clone().try_into().unwrap();
    assert_eq!(typed.batch_size(), 2);
    // A batch of zero samples is a valid typed tensor.
    assert_eq!(Tensor::<Shape2<3, 4>>::from_raw(RawTensor::zeros(&[0, 3, 4], &cpu).unwrap()).unwrap().batch_size(), 0);
    // Typed constructors count values per sample.
    assert!(matches!(Tensor::<Shape2<3, 4>>::from_vec(vec![0.0; 13], &cpu), Err(Error::Shape { .. })));
    // Dataset views of another per-sample size.
    let data = ClassDataset::<Shape1<12>, 2>::new(vec![0.0; 24], vec![0, 1]).unwrap();
    assert!(matches!(data.reshape::<Shape2<5, 2>>(), Err(Error::Shape { op: "ClassDataset::reshape", .. })));
    assert_eq!(data.reshape::<Shape3<1, 3, 4>>().unwrap().get_batch(&[1], &cpu).unwrap().0.shape(), [1, 1, 3, 4]);
}
