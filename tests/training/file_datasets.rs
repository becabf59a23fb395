//! Datasets read from files (issue #30): `ImageFolder` (PNG and JPEG images in a folder per
//! class, written here with the `image` crate) and `CsvDataset` (features and a target column),
//! their values, and their errors naming the file, line and column.

use crate::common::scratch;

use std::path::Path;

use image::{GrayImage, Luma, Rgb, RgbImage, Rgba, RgbaImage};
use rumus::data::{CsvDataset, Dataset, ImageFolder};
use rumus::{Device, Error, Result, Shape3};

/// `root/a`: two RGB PNGs (red 6×4, green 4×4) and a text file; `root/b`: a gray JPEG;
/// `root/c`: an RGBA PNG (blue).
fn image_tree(root: &Path) {
    for class in ["a", "b", "c"] {
        std::fs::create_dir_all(root.join(class)).unwrap();
    }
    RgbImage::from_pixel(6, 4, Rgb([255, 0, 0])).save(root.join("a/1.png")).unwrap();
    RgbImage::from_pixel(4, 4, Rgb([0, 255, 0])).save(root.join("a/2.PNG")).unwrap();
    std::fs::write(root.join("a/notes.txt"), "not an image").unwrap();
    GrayImage::from_pixel(8, 8, Luma([128])).save(root.join("b/x.jpg")).unwrap();
    RgbaImage::from_pixel(3, 5, Rgba([0, 0, 255, 100])).save(root.join("c/y.png")).unwrap();
}

#[test]
fn an_image_folder_reads_classes_resizes_and_scales() -> Result<()> {
    let root = scratch("image_folder_values");
    image_tree(&root);
    let data = ImageFolder::<Shape3<3, 4, 4>, 3>::load(&root)?;
    assert_eq!(data.classes(), ["a", "b", "c"]);
    assert_eq!(data.len(), 4, "the text file is skipped: {:?}", data.files());
    assert_eq!(data.dataset().labels(), [0, 0, 1, 2]);
    let (images, labels) = data.get_batch(&[0, 1, 2, 3], &Device::cpu())?;
    assert_eq!(images.raw().shape(), [4, 3, 4, 4]);
    assert_eq!(labels.to_vec_u32()?, [0, 0, 1, 2]);
    let v = images.raw().to_vec()?;
    let channel_means: Vec<f32> = v.chunks(16).map(|c| c.iter().sum::<f32>() / 16.0).collect();
    let want = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.0, 0.0, 1.0];
    for (i, (got, want)) in channel_means.iter().zip(want).enumerate() {
        // JPEG is lossy: 128/255 within 2/255.
        assert!((got - want).abs() < 0.01, "image {} channel {}: {got} vs {want}", i / 3, i % 3);
    }
    assert!(v.iter().all(|x| (0.0..=1.0).contains(x)));

    let gray = ImageFolder::<Shape3<1, 2, 3>, 3>::load(&root)?;
    let (images, _) = gray.get_batch(&[0, 1, 2, 3], &Device::cpu())?;
    let firsts: Vec<f32> = images.raw().to_vec()?.chunks(6).map(|c| c[0]).collect();
    // Luma of pure red, green and blue is 0.2126, 0.7152 and 0.0722 (Rec. 709, as `image` does).
    for (got, want) in firsts.iter().zip([0.2126, 0.7152, 0.5, 0.0722]) {
        assert!((got - want).abs() < 0.01, "luma {firsts:?}");
    }
    Ok(())
}

#[test]
fn image_folder_errors_name_the_folder_or_file() {
    let root = scratch("image_folder_errors");
    image_tree(&root);
    let r = ImageFolder::<Shape3<3, 4, 4>, 2>::load(&root);
    assert!(matches!(&r, Err(Error::Data(m)) if m.contains("3 class folders")), "{r:?}");
    let r = ImageFolder::<Shape3<2, 4, 4>, 3>::load(&root);
    assert!(matches!(r, Err(Error::Shape { .. })), "two channels: {r:?}");
    let r = ImageFolder::<Shape3<3, 4, 4>, 3>::load(root.join("missing"));
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");

    std::fs::write(root.join("b/broken.png"), b"\x89PNG\r\n\x1a\n this is not the rest of a PNG").unwrap();
    match ImageFolder::<Shape3<3, 4, 4>, 3>::load(&root) {
        Err(Error::Format { path, .. }) => assert!(path.ends_with("b/broken.png"), "{path:?}"),
        other => panic!("a corrupt PNG: {other:?}"),
    }
    std::fs::remove_file(root.join("b/broken.png")).unwrap();
    std::fs::write(root.join("b/x.jpg"), b"GIF89a not a jpeg").unwrap();
    match ImageFolder::<Shape3<3, 4, 4>, 3>::load(&root) {
        Err(Error::Format { path, .. }) => assert!(path.ends_with("b/x.jpg"), "{path:?}"),
        other => panic!("a file that is no JPEG: {other:?}"),
    }
    std::fs::remove_file(root.join("b/x.jpg")).unwrap();
    let r = ImageFolder::<Shape3<3, 4, 4>, 3>::load(&root);
    assert!(matches!(&r, Err(Error::Data(m)) if m.contains("no PNG or JPEG")), "an empty class folder: {r:?}");
}

fn csv_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.csv");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_csv_file_reads_as_class_and_regression_datasets() -> Result<()> {
    let path = csv_file("csv_values", "a,label,b,y\n1,dog,2,0.5\n3, cat ,4,-1.5\n5,dog,6,2\n");
    let (data, classes) = CsvDataset::new(&path, "label").features(&["b", "a"]).classes::<2, 2>()?;
    assert_eq!(classes, ["cat", "dog"]);
    assert_eq!(data.labels(), [1, 0, 1]);
    let (x, _) = data.get_batch(&[0, 1, 2], &Device::cpu())?;
    assert_eq!(x.raw().to_vec()?, [2.0, 1.0, 4.0, 3.0, 6.0, 5.0]);

    let numeric = csv_file("csv_numeric", "f1\tf2\tclass\n0.5\t1\t2\n1e3\t-2\t0\n");
    let (data, classes) = CsvDataset::new(&numeric, "class").delimiter(b'\t').classes::<2, 4>()?;
    assert_eq!(data.labels(), [2, 0]);
    assert_eq!(classes, ["0", "1", "2", "3"]);

    let reg = CsvDataset::new(&path, "y").features(&["a", "b"]).regression::<2>()?;
    let (x, y) = reg.get_batch(&[2, 0], &Device::cpu())?;
    assert_eq!(x.raw().to_vec()?, [5.0, 6.0, 1.0, 2.0]);
    assert_eq!(y.to_vec()?, [2.0, 0.5]);
    Ok(())
}

#[test]
fn csv_errors_name_the_file_line_and_column() {
    let path = csv_file("csv_errors", "a,b,label\n1,2,x\n3,oops,y\n");
    match CsvDataset::new(&path, "label").classes::<2, 2>() {
        Err(Error::Format { path: p, detail }) => {
            assert_eq!(p, path);
            assert!(detail.contains("line 3") && detail.contains("`b`") && detail.contains("oops"), "{detail}");
        }
        other => panic!("a bad cell: {other:?}"),
    }
    let good = csv_file("csv_errors_good", "a,b,label\n1,2,x\n3,4,y\n5,6,9\n");
    let r = CsvDataset::new(&good, "missing").classes::<2, 2>();
    assert!(matches!(&r, Err(Error::Format { detail, .. }) if detail.contains("`missing`")), "{r:?}");
    let r = CsvDataset::new(&good, "label").classes::<3, 3>();
    assert!(matches!(&r, Err(Error::Data(m)) if m.contains("2 feature columns")), "{r:?}");
    let r = CsvDataset::new(&good, "label").classes::<2, 2>();
    assert!(matches!(&r, Err(Error::Data(m)) if m.contains("3 distinct labels")), "{r:?}");
    let r = CsvDataset::new(&good, "label").regression::<2>();
    assert!(matches!(&r, Err(Error::Format { detail, .. }) if detail.contains("line 2")), "a label as a value: {r:?}");
    let numeric = csv_file("csv_errors_numeric", "a,label\n1,0\n2,5\n");
    let r = CsvDataset::new(&numeric, "label").classes::<1, 3>();
    assert!(
        matches!(&r, Err(Error::Format { detail, .. }) if detail.contains("line 3") && detail.contains("class 5")),
        "{r:?}"
    );
    let ragged = csv_file("csv_errors_ragged", "a,label\n1,0\n2\n");
    let r = CsvDataset::new(&ragged, "label").classes::<1, 1>();
    assert!(matches!(r, Err(Error::Format { .. })), "a short row: {r:?}");
    let nan = csv_file("csv_errors_nan", "a,label\nNaN,0\n");
    let r = CsvDataset::new(&nan, "label").classes::<1, 1>();
    assert!(matches!(&r, Err(Error::Format { detail, .. }) if detail.contains("line 2")), "NaN: {r:?}");
    let empty = csv_file("csv_errors_empty", "a,label\n");
    assert!(matches!(CsvDataset::new(&empty, "label").classes::<1, 1>(), Err(Error::Data(_))));
    let r = CsvDataset::new(empty.with_file_name("none.csv"), "label").classes::<1, 1>();
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
}
