//! A 784-300-100-10 multilayer perceptron on MNIST (LeCun et al. 1998 report 3.05% test error
//! for this architecture).
//!
//! `cargo run --release --example mlp -- [--epochs N] [--batch-size N]`
//! (or `RUMUS_EPOCHS` / `RUMUS_BATCH_SIZE`).

use rumus::nn::{Linear, Module, Param};
use rumus::prelude::*;

/// Hand-written until `#[model]` lands: flatten, then three linear layers with ReLU between.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl Mlp {
    fn new(device: &Device, seed: u64) -> Result<Self> {
        Ok(Mlp {
            fc1: Linear::new(device, 784, 300, true, seed)?,
            fc2: Linear::new(device, 300, 100, true, seed + 10)?,
            fc3: Linear::new(device, 100, 10, true, seed + 20)?,
        })
    }
}

impl Module for Mlp {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let h = self.fc1.forward_raw(&x.flatten_from(1)?)?.relu()?;
        let h = self.fc2.forward_raw(&h)?.relu()?;
        self.fc3.forward_raw(&h)
    }

    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc1.visit_params(&rumus::nn::join_name(prefix, "fc1"), visitor);
        self.fc2.visit_params(&rumus::nn::join_name(prefix, "fc2"), visitor);
        self.fc3.visit_params(&rumus::nn::join_name(prefix, "fc3"), visitor);
    }

    fn describe(&self) -> String {
        "Mlp(784 => 300 => 100 => 10)".into()
    }
}

impl Model for Mlp {
    type Input = Shape3<1, 28, 28>;
    type Output = Shape1<10>;
}

/// `--name value` from the command line, else the environment variable, else `default`.
fn setting(flag: &str, env: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| std::env::var(env).ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<()> {
    let epochs = setting("--epochs", "RUMUS_EPOCHS", 10);
    let batch_size = setting("--batch-size", "RUMUS_BATCH_SIZE", 64);
    let device = Device::best();
    let (train, test) = rumus::data::mnist::load_or_fetch("data/mnist")?;
    let mut model = Mlp::new(&device, 42)?;
    println!("{} on {device}: {} trainable parameters", model.describe(), rumus::nn::count_trainable(&model));
    let history =
        model.fit(&train, Fit::epochs(epochs).batch_size(batch_size).optimizer(Adam::new(1e-3)).validation(&test))?;
    history.to_csv("mlp-history.csv")?;
    let eval = model.evaluate(&test)?;
    println!("test accuracy {:.2}% (error {:.2}%)", 100.0 * eval.accuracy, 100.0 * (1.0 - eval.accuracy));
    model.save("mlp.safetensors")
}
