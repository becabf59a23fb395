//! A 784-300-100-10 multilayer perceptron on MNIST (LeCun et al. 1998 report 3.05% test error
//! for this architecture).
//!
//! `cargo run --release --example mlp -- [--epochs N] [--batch-size N]`
//! (or `RUMUS_EPOCHS` / `RUMUS_BATCH_SIZE`).

use rumus::prelude::*;

mod common;

/// 784-300-100-10 with ReLU: the image is flattened, in-features are inferred.
#[model(input = [1, 28, 28])]
pub struct Mlp {
    layers: layers![Flatten, Linear(300), Relu, Linear(100), Relu, Linear(10)],
}

fn main() -> Result<()> {
    let epochs = common::count("--epochs", "RUMUS_EPOCHS", 10);
    let batch_size = common::count("--batch-size", "RUMUS_BATCH_SIZE", 64);
    let device = Device::best();
    let (train, test) = rumus::data::mnist::load_or_fetch("data/mnist")?;
    let mut model = Mlp::new(&device, 42)?;
    println!("MLP 784-300-100-10 on {device}\n{}", Mlp::summary());
    let history =
        model.fit(&train, Fit::epochs(epochs).batch_size(batch_size).optimizer(Adam::new(1e-3)).validation(&test))?;
    history.to_csv("mlp-history.csv")?;
    let eval = model.evaluate(&test)?;
    println!("test accuracy {:.2}% (error {:.2}%)", 100.0 * eval.accuracy, 100.0 * (1.0 - eval.accuracy));
    model.save("mlp.safetensors")
}
