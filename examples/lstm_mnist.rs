//! Sequential MNIST with an LSTM: each 28×28 image is read as 28 time steps of 28 pixels (one
//! row per step), the LSTM's last hidden state goes through a linear classifier.
//!
//! `cargo run --release --example lstm_mnist -- [--epochs N] [--batch-size N]`
//! (or `RUMUS_EPOCHS` / `RUMUS_BATCH_SIZE`). Fetches MNIST into `data/mnist` on first run like
//! `examples/mnist.rs` (or reads `RUMUS_MNIST_DIR`), trains with Adam(1e-3) and prints the test
//! accuracy and the time per epoch. Its PyTorch twin is `tools/bench/torch_lstm.py`.

use rumus::prelude::*;

mod common;

/// Rows as steps: [1, 28, 28] → [28, 28] → LSTM(128), last state [128] → [10].
/// 82,186 parameters under PyTorch's names (`rnn.1.weight_ih_l0` ..., `head.0.weight`).
#[model(input = [1, 28, 28])]
pub struct SeqMnist {
    rnn: layers![Reshape(28, 28), Lstm(128, return_sequences = false)],
    head: layers![Linear(10)],
}

fn main() -> Result<()> {
    let epochs = common::count("--epochs", "RUMUS_EPOCHS", 3);
    let batch_size = common::count("--batch-size", "RUMUS_BATCH_SIZE", 128);
    let device = Device::best();
    let (train, test) = rumus::data::mnist::load_or_fetch("data/mnist")?;
    let mut model = SeqMnist::new(&device, 42)?;
    println!("LSTM on sequential MNIST on {device}\n{}", SeqMnist::summary());
    let fit = Fit::epochs(epochs).batch_size(batch_size).optimizer(Adam::new(1e-3)).validation(&test);
    let history = model.fit(&train, fit)?;
    let seconds = history.epoch_seconds();
    let mean_epoch = seconds.iter().sum::<f64>() / history.epochs().max(1) as f64;
    // The first epoch includes the GPU's kernel compilation; the rest are steady state.
    let steady =
        if seconds.len() > 1 { seconds[1..].iter().sum::<f64>() / (seconds.len() - 1) as f64 } else { mean_epoch };
    println!(
        "test accuracy {:.2}% ({mean_epoch:.2} s/epoch, {steady:.2} s/epoch after the first)",
        100.0 * model.evaluate(&test)?.accuracy
    );
    Ok(())
}
