//! Fashion-MNIST with a 784-256-128-10 MLP (dropout 0.1), AdamW and a cosine learning-rate schedule;
//! macro F1 and the confusion matrix of the test images, printed with the class names.
//!
//! Needs the IDX files: `apt-get install dataset-fashion-mnist` puts them in
//! `/usr/share/datasets/fashion-mnist` (or pass another folder with `--data DIR`).
//!
//! `cargo run --release --example fashion -- [--epochs N] [--batch-size N] [--data DIR]`

use rumus::data::fashion_mnist;
use rumus::optim::schedule::CosineAnnealing;
use rumus::prelude::*;

mod common;

/// 784-256-128-10 with ReLU and dropout between the hidden layers.
#[model(input = [1, 28, 28])]
pub struct Mlp {
    layers: layers![Flatten, Linear(256), Relu, Dropout(0.1), Linear(128), Relu, Linear(10)],
}

fn main() -> Result<()> {
    let epochs = common::count("--epochs", "RUMUS_EPOCHS", 10);
    let batch_size = common::count("--batch-size", "RUMUS_BATCH_SIZE", 64);
    let dir = common::setting("--data", "RUMUS_FASHION_DIR").unwrap_or_else(|| fashion_mnist::DEBIAN_DIR.to_string());
    let device = Device::best();
    let (train, test) = fashion_mnist::load(&dir)?;
    let mut model = Mlp::new(&device, 7)?;
    println!("Fashion-MNIST MLP on {device}\n{}", Mlp::summary());
    let history = model.fit(
        &train,
        Fit::epochs(epochs)
            .batch_size(batch_size)
            .optimizer(AdamW::new(1e-3))
            .schedule(CosineAnnealing { t_max: epochs, eta_min: 1e-5 })
            .metrics([Metric::F1, Metric::ConfusionMatrix])
            .validation(&test),
    )?;
    history.to_csv("fashion-history.csv")?;
    history.plot("fashion-curves.svg")?;
    history.plot_metric("f1", "fashion-f1.svg")?;
    if let Some(matrix) = history.val_confusion_matrix() {
        let matrix = matrix.clone().with_labels(fashion_mnist::CLASSES)?;
        println!("test images, true class by row, predicted by column:\n{matrix}");
        matrix.to_svg("fashion-confusion.svg")?;
    }
    let eval = model.evaluate(&test)?;
    println!("test accuracy {:.2}%", 100.0 * eval.accuracy);
    // Show a few predictions by name.
    let (x, y) = test.get_batch(&[0, 1, 2, 3, 4], &device)?;
    let predicted = model.predict(&x)?.argmax(-1)?.to_vec_u32()?;
    for (p, t) in predicted.iter().zip(y.to_vec_u32()?) {
        println!("  predicted {:<12} true {}", fashion_mnist::CLASSES[*p as usize], fashion_mnist::CLASSES[t as usize]);
    }
    model.save("fashion.safetensors")
}
