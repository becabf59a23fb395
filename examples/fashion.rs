//! Fashion-MNIST with a 784-256-128-10 MLP (dropout 0.1), AdamW and a cosine learning-rate schedule.
//!
//! Needs the IDX files: `apt-get install dataset-fashion-mnist` puts them in
//! `/usr/share/datasets/fashion-mnist` (or pass another folder with `--data DIR`).
//!
//! `cargo run --release --example fashion -- [--epochs N] [--batch-size N] [--data DIR]`

use rumus::data::fashion_mnist;
use rumus::optim::schedule::CosineAnnealing;
use rumus::prelude::*;

/// 784-256-128-10 with ReLU and dropout between the hidden layers.
#[model(input = [1, 28, 28])]
pub struct Mlp {
    layers: layers![Flatten, Linear(256), Relu, Dropout(0.1), Linear(128), Relu, Linear(10)],
}

/// `--name value` from the command line, else the environment variable, else `default`.
fn setting(flag: &str, env: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| std::env::var(env).ok())
        .unwrap_or_else(|| default.to_string())
}

fn main() -> Result<()> {
    let epochs: usize = setting("--epochs", "RUMUS_EPOCHS", "10").parse().unwrap_or(10);
    let batch_size: usize = setting("--batch-size", "RUMUS_BATCH_SIZE", "64").parse().unwrap_or(64);
    let dir = setting("--data", "RUMUS_FASHION_DIR", fashion_mnist::DEBIAN_DIR);
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
            .validation(&test),
    )?;
    history.to_csv("fashion-history.csv")?;
    history.plot("fashion-curves.svg")?;
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
