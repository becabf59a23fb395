//! A convolutional autoencoder on Fashion-MNIST: two stride-2 convolutions down to a
//! 32×7×7 code, two stride-2 transposed convolutions back up, a sigmoid, and the mean squared
//! error against the input, trained with `fit` and Adam. Prints the test reconstruction MSE and
//! the time of each epoch, and saves originals above their reconstructions as a PNG grid.
//! Its PyTorch twin is tools/bench/torch_autoencoder.py (same model, optimizer, batch and epochs).
//!
//! Needs the IDX files: `apt-get install dataset-fashion-mnist` puts them in
//! `/usr/share/datasets/fashion-mnist` (or pass another folder with `--data DIR`).
//!
//! `cargo run --release --example autoencoder -- [--epochs N] [--batch-size N] [--data DIR] [--png FILE]`

use rumus::data::{fashion_mnist, TensorDataset};
use rumus::prelude::*;

mod common;

/// 1×28×28 → 16×14×14 → 32×7×7 → 16×14×14 → 1×28×28, pixels in (0, 1).
#[model(input = [1, 28, 28])]
pub struct AutoEncoder {
    encoder: layers![
        Conv2d(16, kernel = 3, stride = 2, padding = 1),
        Relu,
        Conv2d(32, kernel = 3, stride = 2, padding = 1),
        Relu
    ],
    decoder: layers![
        ConvTranspose2d(16, kernel = 3, stride = 2, padding = 1, output_padding = 1),
        Relu,
        ConvTranspose2d(1, kernel = 3, stride = 2, padding = 1, output_padding = 1),
        Sigmoid,
    ],
}

type Images = TensorDataset<Shape3<1, 28, 28>, Shape3<1, 28, 28>>;

/// The images of a Fashion-MNIST split as pixels in [0, 1] (the loader normalises them),
/// each its own target.
fn pixels(split: &rumus::data::mnist::Mnist) -> Result<(Images, Vec<f32>)> {
    let all: Vec<usize> = (0..split.len()).collect();
    let (x, _) = split.get_batch(&all, &Device::cpu())?;
    let values: Vec<f32> =
        x.raw().to_vec()?.iter().map(|v| (v * fashion_mnist::STD + fashion_mnist::MEAN).clamp(0.0, 1.0)).collect();
    Ok((TensorDataset::new(values.clone(), values.clone())?, values))
}

/// Writes `originals` (top row) above `reconstructions` (bottom row), 28×28 grey tiles with a
/// 2-pixel white margin, as an 8-bit greyscale PNG.
fn save_grid(path: &str, originals: &[f32], reconstructions: &[f32], count: usize) -> Result<()> {
    const TILE: usize = 28;
    const GAP: usize = 2;
    let (width, height) = (count * (TILE + GAP) + GAP, 2 * (TILE + GAP) + GAP);
    let mut grey = vec![255u8; width * height];
    for (row, images) in [originals, reconstructions].into_iter().enumerate() {
        for k in 0..count {
            for y in 0..TILE {
                for x in 0..TILE {
                    let v = images[k * TILE * TILE + y * TILE + x];
                    let (py, px) = (GAP + row * (TILE + GAP) + y, GAP + k * (TILE + GAP) + x);
                    grey[py * width + px] = (v.clamp(0.0, 1.0) * 255.0).round() as u8;
                }
            }
        }
    }
    let io = |source: std::io::Error| Error::Io { path: path.into(), source };
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let mut encoder = png::Encoder::new(file, width as u32, height as u32);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let encoding = |e: png::EncodingError| Error::Format { path: path.into(), detail: e.to_string() };
    let mut writer = encoder.write_header().map_err(encoding)?;
    writer.write_image_data(&grey).map_err(encoding)?;
    writer.finish().map_err(encoding)
}

fn main() -> Result<()> {
    let epochs = common::count("--epochs", "RUMUS_EPOCHS", 5);
    let batch_size = common::count("--batch-size", "RUMUS_BATCH_SIZE", 128);
    let dir = common::setting("--data", "RUMUS_FASHION_DIR").unwrap_or_else(|| fashion_mnist::DEBIAN_DIR.to_string());
    let png_path = common::setting("--png", "RUMUS_PNG").unwrap_or_else(|| "autoencoder-reconstructions.png".into());
    let device = Device::best();
    let (train, test) = fashion_mnist::load(&dir)?;
    let ((train, _), (test, test_pixels)) = (pixels(&train)?, pixels(&test)?);
    let mut model = AutoEncoder::new(&device, 7)?;
    println!("Fashion-MNIST convolutional autoencoder on {device}\n{}", AutoEncoder::summary());
    let history =
        model.fit(&train, Fit::epochs(epochs).batch_size(batch_size).optimizer(Adam::new(1e-3)).loss(Loss::Mse))?;
    let seconds = history.epoch_seconds();
    for (epoch, s) in seconds.iter().enumerate() {
        println!("epoch {}: {s:.2} s", epoch + 1);
    }
    if seconds.len() > 1 {
        let rest = &seconds[1..];
        println!("mean epoch after the first: {:.2} s", rest.iter().sum::<f64>() / rest.len() as f64);
    }
    let eval = model.evaluate(&test)?;
    println!("test reconstruction MSE {:.5}", eval.loss);
    let shown = 12;
    let (x, _) = test.get_batch(&(0..shown).collect::<Vec<_>>(), &device)?;
    let reconstructions = model.predict(&x)?.raw().to_vec()?;
    save_grid(&png_path, &test_pixels[..shown * 28 * 28], &reconstructions, shown)?;
    println!("saved originals (top) and reconstructions (bottom) to {png_path}");
    Ok(())
}
