//! Fashion-MNIST with a 784-256-128-10 MLP, AdamW and a cosine learning-rate schedule.
//!
//! Needs the IDX files: `apt-get install dataset-fashion-mnist` puts them in
//! `/usr/share/datasets/fashion-mnist` (or pass another folder with `--data DIR`).
//!
//! `cargo run --release --example fashion -- [--epochs N] [--batch-size N] [--data DIR]`

use rumus::data::fashion_mnist;
use rumus::nn::{join_name, Linear, Module, Param};
use rumus::optim::schedule::CosineAnnealing;
use rumus::prelude::*;

/// Hand-written until `#[model]` lands.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl Mlp {
    fn new(device: &Device, seed: u64) -> Result<Self> {
        Ok(Mlp {
            fc1: Linear::new(device, 784, 256, true, seed)?,
            fc2: Linear::new(device, 256, 128, true, seed + 10)?,
            fc3: Linear::new(device, 128, 10, true, seed + 20)?,
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
        self.fc1.visit_params(&join_name(prefix, "fc1"), visitor);
        self.fc2.visit_params(&join_name(prefix, "fc2"), visitor);
        self.fc3.visit_params(&join_name(prefix, "fc3"), visitor);
    }

    fn describe(&self) -> String {
        "Mlp(784 => 256 => 128 => 10)".into()
    }
}

impl Model for Mlp {
    type Input = Shape3<1, 28, 28>;
    type Output = Shape1<10>;
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
    println!("{} on {device}: {} trainable parameters", model.describe(), rumus::nn::count_trainable(&model));
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
