//! Datasets, the DataLoader, IDX parsing and the real MNIST / Fashion-MNIST files.

use crate::common;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use common::{mnist, scratch};
use rumus::data::{fashion_mnist, mnist as mnist_mod, parse_idx, DataLoader, Dataset};
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

fn format_error(result: Result<impl std::fmt::Debug>, file: &str, needle: &str) {
    match result {
        Err(Error::Format { path, detail }) => {
            assert!(path.to_string_lossy().contains(file), "error names {path:?}, expected {file}");
            assert!(detail.contains(needle), "{detail:?} should mention {needle:?}");
        }
        other => panic!("expected a Format error naming {file}, got {other:?}"),
    }
}

#[test]
fn idx_files_parse_raw_and_gzipped() -> Result<()> {
    let bytes = idx_bytes(8, &[2, 3], &[1, 2, 3, 4, 5, 6]);
    let raw = parse_idx(&bytes, Path::new("a"))?;
    assert_eq!(raw.dims, [2, 3]);
    assert_eq!(raw.data, [1, 2, 3, 4, 5, 6]);
    assert_eq!(parse_idx(&gzip(&bytes), Path::new("a.gz"))?, raw);
    Ok(())
}

#[test]
fn broken_idx_files_are_format_errors_naming_the_file() {
    let p = Path::new("broken-idx3-ubyte");
    format_error(parse_idx(&[], p), "broken", "empty");
    format_error(parse_idx(&[0, 0], p), "broken", "too few");
    format_error(parse_idx(&[1, 2, 8, 1, 0, 0, 0, 1, 0], p), "broken", "magic");
    format_error(parse_idx(&[0, 0, 0x0d, 1, 0, 0, 0, 1, 0], p), "broken", "element type");
    format_error(parse_idx(&[0, 0, 8, 3, 0, 0], p), "broken", "truncated");
    format_error(parse_idx(&idx_bytes(8, &[10, 28, 28], &[0; 100]), p), "broken", "truncated");
    format_error(parse_idx(&idx_bytes(8, &[2], &[1, 2, 3]), p), "broken", "trailing");
    let gz = gzip(&idx_bytes(8, &[4], &[1, 2, 3, 4]));
    format_error(parse_idx(&gz[..gz.len() / 2], p), "broken", "gzip");
}

/// Writes an MNIST-shaped folder with `images` images and `labels` labels.
fn fake_mnist(dir: &Path, images: u32, labels: u32) {
    let img = idx_bytes(8, &[images, 28, 28], &vec![128; images as usize * 784]);
    let lab = idx_bytes(8, &[labels], &vec![3; labels as usize]);
    for split in ["train", "t10k"] {
        std::fs::write(dir.join(format!("{split}-images-idx3-ubyte")), &img).unwrap();
        std::fs::write(dir.join(format!("{split}-labels-idx1-ubyte.gz")), gzip(&lab)).unwrap();
    }
}

#[test]
fn mnist_loader_validates_counts_and_files() -> Result<()> {
    let dir = scratch("fake_mnist_ok");
    fake_mnist(&dir, 5, 5);
    let (train, test) = mnist_mod::load(&dir)?;
    assert_eq!((train.len(), test.len()), (5, 5));
    let (x, y) = train.get_batch(&[0, 4], &Device::cpu())?;
    assert_eq!(x.shape(), [2, 1, 28, 28]);
    let expected = (128.0 / 255.0 - mnist_mod::MEAN) / mnist_mod::STD;
    assert!((x.to_vec()?[0] - expected).abs() < 1e-6);
    assert_eq!(y.to_vec_u32()?, [3, 3]);

    let dir = scratch("fake_mnist_mismatch");
    fake_mnist(&dir, 5, 4);
    format_error(mnist_mod::load(&dir).map(|_| ()), "train-labels-idx1-ubyte.gz", "4 labels for the 5 images");

    let dir = scratch("fake_mnist_truncated");
    fake_mnist(&dir, 5, 5);
    let path = dir.join("t10k-images-idx3-ubyte");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    format_error(mnist_mod::load(&dir).map(|_| ()), "t10k-images-idx3-ubyte", "truncated");
    std::fs::write(&path, b"").unwrap();
    format_error(mnist_mod::load(&dir).map(|_| ()), "t10k-images-idx3-ubyte", "empty");

    let dir = scratch("fake_mnist_missing");
    let err = mnist_mod::load(&dir).unwrap_err().to_string();
    assert!(err.contains("train-images-idx3-ubyte") && err.contains("load_or_fetch"), "{err}");
    let err = fashion_mnist::load(&dir).unwrap_err().to_string();
    assert!(err.contains("apt-get install dataset-fashion-mnist"), "{err}");
    Ok(())
}

#[test]
fn real_mnist_has_the_published_counts_and_first_labels() -> Result<()> {
    let (train, test) = mnist();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(&train.labels()[..5], [5, 0, 4, 1, 9]);
    assert_eq!(&test.labels()[..5], [7, 2, 1, 0, 4]);
    // Normalised with the training set's statistics: mean ≈ 0, std ≈ 1 over the training images.
    let (x, _) = train.get_batch(&(0..10_000).collect::<Vec<_>>(), &Device::cpu())?;
    let v = x.to_vec()?;
    let mean = v.iter().map(|&p| p as f64).sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|&p| (p as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
    assert!(mean.abs() < 0.02 && (var.sqrt() - 1.0).abs() < 0.02, "mean {mean}, std {}", var.sqrt());
    Ok(())
}

#[test]
fn real_fashion_mnist_from_the_debian_package() -> Result<()> {
    if !Path::new(fashion_mnist::DEBIAN_DIR).is_dir() {
        common::skip_loudly(
            "real_fashion_mnist_from_the_debian_package",
            &format!("{} is absent; run `apt-get install -y dataset-fashion-mnist`", fashion_mnist::DEBIAN_DIR),
        );
        return Ok(());
    }
    let (train, test) = fashion_mnist::load(fashion_mnist::DEBIAN_DIR)?;
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(&train.labels()[..10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]);
    assert_eq!(&test.labels()[..10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]);
    Ok(())
}

#[test]
fn class_dataset_rejects_bad_labels_and_sizes() {
    let err = ClassDataset::<Shape1<2>, 3>::new(vec![0.0; 8], vec![0, 2, 3, 1]).err().unwrap();
    assert!(matches!(err, Error::IndexOutOfRange { index: 3, limit: 3, position: 2, .. }), "{err}");
    let err = ClassDataset::<Shape1<2>, 3>::new(vec![0.0; 7], vec![0, 1, 2, 1]).err().unwrap();
    assert!(matches!(err, Error::Data(_)), "{err}");
    let data = ClassDataset::<Shape1<2>, 3>::new((0..8).map(|v| v as f32).collect(), vec![0, 1, 2, 1]).unwrap();
    let err = data.get_batch(&[1, 4], &Device::cpu()).err().unwrap();
    assert!(matches!(err, Error::IndexOutOfRange { index: 4, position: 1, .. }), "{err}");
    let flat = data.reshape::<Shape2<1, 2>>().unwrap();
    assert_eq!(flat.get_batch(&[3], &Device::cpu()).unwrap().0.to_vec().unwrap(), [6.0, 7.0]);
    assert!(data.reshape::<Shape1<3>>().is_err());
}

fn toy(n: usize) -> ClassDataset<Shape1<1>, 10> {
    ClassDataset::new((0..n).map(|v| v as f32).collect(), (0..n as u32).map(|v| v % 10).collect()).unwrap()
}

fn epoch_values(loader: &DataLoader<'_, ClassDataset<Shape1<1>, 10>>, epoch: usize) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    loader
        .for_each(epoch, |b| {
            out.push(b.inputs.to_vec()?);
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    out
}

#[test]
fn data_loader_batches_shuffles_by_seed_and_drops_the_last_batch() -> Result<()> {
    let data = toy(10);
    let cpu = Device::cpu();
    assert!(matches!(DataLoader::new(&data, 0, &cpu), Err(Error::InvalidArgument { .. })));

    let plain = DataLoader::new(&data, 4, &cpu)?;
    assert_eq!(plain.len(), 3);
    assert_eq!(epoch_values(&plain, 0), [vec![0.0, 1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0, 7.0], vec![8.0, 9.0]]);
    let dropped = DataLoader::new(&data, 4, &cpu)?.drop_last(true);
    assert_eq!(dropped.len(), 2);
    assert_eq!(epoch_values(&dropped, 0).len(), 2);

    let shuffled = DataLoader::new(&data, 4, &cpu)?.shuffle(7);
    let e0 = epoch_values(&shuffled, 0);
    assert_eq!(e0, epoch_values(&DataLoader::new(&data, 4, &cpu)?.shuffle(7).prefetch(false), 0));
    assert_ne!(e0, epoch_values(&shuffled, 1), "each epoch gets its own order");
    let mut all: Vec<f32> = e0.concat();
    all.sort_by(f32::total_cmp);
    assert_eq!(all, (0..10).map(|v| v as f32).collect::<Vec<_>>(), "an epoch is a permutation");

    // Targets follow their samples.
    for batch in shuffled.iter(3) {
        let batch = batch?;
        let xs = batch.inputs.to_vec()?;
        let ys = batch.targets.to_vec_u32()?;
        assert!(xs.iter().zip(&ys).all(|(x, y)| *x as u32 % 10 == *y));
    }

    // Stopping early ends the prefetch thread cleanly.
    let mut seen = 0;
    DataLoader::new(&data, 2, &cpu)?.for_each(0, |_| {
        seen += 1;
        Ok(if seen == 2 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
    })?;
    assert_eq!(seen, 2);
    let subset = DataLoader::new(&data, 3, &cpu)?.with_indices(vec![9, 8])?;
    assert_eq!(epoch_values(&subset, 0), [vec![9.0, 8.0]]);
    assert!(DataLoader::new(&data, 3, &cpu)?.with_indices(vec![10]).is_err());
    Ok(())
}

#[test]
fn errors_from_the_prefetch_thread_reach_the_caller() {
    struct Failing;
    impl Dataset for Failing {
        type Sample = Shape1<1>;
        type Target = Class<2>;
        fn len(&self) -> usize {
            4
        }
        fn get_batch(&self, indices: &[usize], _: &Device) -> Result<(Tensor<Shape1<1>>, RawTensor)> {
            Err(Error::Data(format!("cannot read samples {indices:?}")))
        }
    }
    let err = DataLoader::new(&Failing, 2, &Device::cpu())
        .unwrap()
        .for_each(0, |_| Ok(ControlFlow::Continue(())))
        .unwrap_err();
    assert!(err.to_string().contains("cannot read samples [0, 1]"), "{err}");
}

#[test]
fn regression_datasets_validate_and_batch() -> Result<()> {
    assert!(TensorDataset::<Shape1<2>, Shape1<1>>::new(vec![0.0; 5], vec![0.0; 3]).is_err());
    let data = TensorDataset::<Shape1<2>, Shape1<1>>::new(vec![1.0, 2.0, 3.0, 4.0], vec![10.0, 20.0])?;
    let (x, y) = data.get_batch(&[1, 0], &Device::cpu())?;
    assert_eq!(x.to_vec()?, [3.0, 4.0, 1.0, 2.0]);
    assert_eq!(y.to_vec()?, [20.0, 10.0]);
    assert_eq!(y.shape(), [2, 1]);
    Ok(())
}
