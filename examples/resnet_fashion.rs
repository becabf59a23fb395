//! ResNet-18 (CIFAR form, `rumus_test_models::ResNet18`, 11.2 M parameters) on Fashion-MNIST
//! padded to 32×32: a GPU example.
//!
//! Each 28×28 grey image is padded by 2 pixels on every side with the normalised value of a black
//! pixel (`-MEAN / STD`) and replicated to 3 channels, so the model is the same 3-channel network
//! that the tests and the `resnet` benchmark use. SGD (momentum 0.9, weight decay 5e-4, learning
//! rate 0.1 at batch 128, scaled with the batch size unless `--lr` says otherwise) with cosine
//! annealing, cross-entropy.
//!
//! Needs the IDX files: `apt-get install dataset-fashion-mnist` puts them in
//! `/usr/share/datasets/fashion-mnist` (or pass another folder with `--data DIR`).
//!
//! ```text
//! cargo run --release --example resnet_fashion -- [--epochs N] [--batch-size N] [--lr X] [--steps N] [--samples N] [--data DIR] [--precision f32|tensor-cores]
//! ```
//!
//! `--precision tensor-cores` trains in the mixed-precision mode: matmuls and Winograd
//! convolutions on tensor cores with f16 operands and f32 accumulation
//! (`MatmulPrecision::F16TensorCores`, on adapters with cooperative matrices; elsewhere an error),
//! f32 weights and activations, and dynamic loss scaling (`LossScaler`) so that small gradients
//! survive the f16 rounding.
//!
//! `--steps N` makes each epoch N optimizer steps instead of a pass over the data and `--samples N`
//! keeps the first N training and test images: `--epochs 4 --steps 5 --batch-size 16 --samples 512`
//! shows the loss fall in a few minutes on a CPU.

use rumus::data::mnist::Mnist;
use rumus::data::{fashion_mnist, ClassDataset, Dataset};
use rumus::optim::schedule::CosineAnnealing;
use rumus::optim::LossScaler;
use rumus::prelude::*;
use rumus_test_models::ResNet18;

mod common;

/// Padded, 3-channel Fashion-MNIST images: the per-sample shape ResNet18 takes.
type Padded = ClassDataset<Shape3<3, 32, 32>, 10>;

/// The first `limit` images of `data`, padded to 32×32 and replicated to 3 channels.
fn pad(data: &Mnist, limit: usize) -> Result<Padded> {
    let data = data.take(limit)?;
    let indices: Vec<usize> = (0..data.len()).collect();
    let (images, _) = data.get_batch(&indices, &Device::cpu())?;
    let images = images.raw().to_vec()?;
    let black = -fashion_mnist::MEAN / fashion_mnist::STD;
    let mut out = vec![black; data.len() * 3 * 32 * 32];
    for (sample, image) in images.chunks_exact(28 * 28).enumerate() {
        for channel in 0..3 {
            let plane = &mut out[(sample * 3 + channel) * 32 * 32..][..32 * 32];
            for (row, pixels) in image.chunks_exact(28).enumerate() {
                plane[(row + 2) * 32 + 2..][..28].copy_from_slice(pixels);
            }
        }
    }
    ClassDataset::new(out, data.labels().to_vec())
}

fn main() -> Result<()> {
    let epochs = common::count("--epochs", "RUMUS_EPOCHS", 10);
    let batch_size = common::count("--batch-size", "RUMUS_BATCH_SIZE", 128);
    let steps = common::count("--steps", "RUMUS_STEPS", 0);
    let samples = common::count("--samples", "RUMUS_SAMPLES", usize::MAX);
    // The linear scaling rule (Goyal et al., 2017): 0.1 at batch 128.
    let lr =
        common::setting("--lr", "RUMUS_LR").and_then(|v| v.parse().ok()).unwrap_or(0.1 * batch_size as f32 / 128.0);
    let dir = common::setting("--data", "RUMUS_FASHION_DIR").unwrap_or_else(|| fashion_mnist::DEBIAN_DIR.to_string());
    let device = Device::best();
    let mixed = common::mixed_precision("resnet_fashion", &device)?;
    let (train, test) = fashion_mnist::load(&dir)?;
    let (train, test) = (pad(&train, samples)?, pad(&test, samples)?);
    let mut model = ResNet18::new(&device, 7)?;
    println!(
        "Fashion-MNIST (padded to 32×32) ResNet-18 on {device}, {}\n{}",
        device.matmul_precision(),
        ResNet18::summary()
    );
    let mut fit = Fit::epochs(epochs)
        .batch_size(batch_size)
        .optimizer(Sgd::new(lr).momentum(0.9).weight_decay(5e-4))
        .schedule(CosineAnnealing { t_max: epochs, eta_min: 0.0 });
    if steps > 0 {
        fit = fit.steps_per_epoch(steps);
    }
    if mixed {
        fit = fit.loss_scaler(LossScaler::new());
    }
    let history = model.fit(&train, fit.validation(&test))?;
    history.to_csv("resnet-fashion-history.csv")?;
    let eval = model.evaluate(&test)?;
    println!("test accuracy {:.2}%", 100.0 * eval.accuracy);
    model.save("resnet-fashion.safetensors")
}
