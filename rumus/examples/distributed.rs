//! Data-parallel training under MPI: LeNet-5 on MNIST, or a tiny synthetic job for tests and
//! benchmarks. Every rank runs this program; `batch_size` is per rank.
//!
//! ```text
//! mpirun -np 2 cargo run --release -p rumus --example distributed --features mpi -- [--epochs N] [--batch-size B]
//! mpirun -np 2 target/release/examples/distributed --synthetic --out DIR [--nan-rank R | --exit-rank R]
//! ```
//!
//! Flags: `--synthetic` (an MLP on 256 fixed random samples, on the CPU, SGD), `--epochs N`,
//! `--batch-size B` (per rank), `--out DIR` (every rank asks to save `weights.safetensors`,
//! `history.csv`, `ckpt-{epoch}.safetensors`, `optimizer.safetensors` and `rank{r}.txt` there: only rank 0 writes), `--nan-rank R`
//! (rank R's inputs are NaN), `--exit-rank R` (rank R exits with status 3 after the first
//! epoch), `--steps N` (MNIST: N steps per epoch), `--random N` (N random MNIST-shaped
//! images instead of MNIST, for timing), `--bench N` (also times N all-reduces of the model's gradient bucket),
//! `--bucket-mb X` (`Fit::bucket_cap_mb`: gradient buckets of at most X MiB, `inf` for one),
//! `--accumulate K` (`Fit::accumulate_grad_batches`); synthetic only: `--adam` (Adam(1e-2)
//! instead of SGD), `--no-shuffle`, `--augment` (the samples as 4×4 images through a random
//! crop and flip; `--augment-seed S`, default 5), `--resume DIR` (rank 0 alone loads the weights and the
//! optimizer state `--out DIR` saved; `fit` broadcasts them). MNIST comes
//! from `data/mnist` (or `RUMUS_MNIST_DIR`), fetched on first use.

use std::path::PathBuf;
use std::time::Instant;

use rumus::data::transforms::Augment;
use rumus::data::{ClassDataset, Dataset, SampleFor, TargetFor};
use rumus::distributed::{Distributed, Mpi};
use rumus::nn::named_parameters;
use rumus::prelude::*;
use rumus::train::{Callback, ModelCheckpoint, TrainContext, ValidationFor};

/// LeNet-5 with ReLU and max pooling (as `examples/mnist.rs`): 61,706 parameters.
#[model(input = [1, 28, 28])]
pub struct LeNet {
    features:
        layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)],
    head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)],
}

/// A small MLP for the synthetic job: 16 inputs, 4 classes.
#[model(input = [16])]
pub struct Tiny {
    body: layers![Linear(32), Relu, Linear(4)],
}

/// The synthetic job's MLP on its samples as 4×4 images, for `--augment`.
#[model(input = [1, 4, 4])]
pub struct TinyImage {
    body: layers![Flatten, Linear(32), Relu, Linear(4)],
}

/// `--flag value` from the command line.
fn setting(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned()
}

fn number(flag: &str, default: usize) -> usize {
    setting(flag).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// Ends this process with status 3 after the first epoch: a rank that dies mid-training.
struct ExitAfterFirstEpoch;

impl Callback for ExitAfterFirstEpoch {
    fn on_epoch_end(&mut self, _: usize, _: &rumus::train::Logs, _: &mut TrainContext<'_>) -> Result<()> {
        eprintln!("distributed example: this rank exits now (--exit-rank)");
        std::process::exit(3)
    }
}

/// Makes this rank's weights NaN when the second epoch begins: a rank that diverges.
struct NanWeights;

impl Callback for NanWeights {
    fn on_epoch_begin(&mut self, epoch: usize, ctx: &mut TrainContext<'_>) -> Result<()> {
        if epoch == 1 {
            eprintln!("distributed example: this rank's weights become NaN now (--nan-rank)");
            for (_, p) in named_parameters(ctx.model()) {
                let device = p.tensor().device().clone();
                p.assign(&RawTensor::from_vec(vec![f32::NAN; p.tensor().numel()], p.shape(), &device)?)?;
            }
        }
        Ok(())
    }
}

/// Writes the optimizer's state to `optimizer.safetensors` in the folder when training ends
/// (every rank asks; only rank 0 writes), for `--resume`.
struct SaveOptimizer(PathBuf);

impl Callback for SaveOptimizer {
    fn on_train_end(&mut self, ctx: &mut TrainContext<'_>) -> Result<()> {
        rumus::io::save_optimizer(ctx.optimizer(), self.0.join("optimizer.safetensors"))
    }
}

/// `--resume DIR`: rank 0 alone loads `weights.safetensors` and `optimizer.safetensors` from
/// DIR (`fit` broadcasts both to the other ranks).
fn resume<M: Model>(dist: &Distributed, model: &mut M, optimizer: &mut dyn Optimizer) -> Result<()> {
    let Some(dir) = setting("--resume").map(PathBuf::from) else { return Ok(()) };
    if dist.is_root() {
        model.load(dir.join("weights.safetensors"))?;
        rumus::io::load_optimizer(optimizer, &named_parameters(&*model), dir.join("optimizer.safetensors"))?;
    }
    Ok(())
}

/// 256 fixed samples of 16 features, the class a fixed function of them.
fn synthetic() -> Result<ClassDataset<Shape1<16>, 4>> {
    let (data, labels) = synthetic_values();
    ClassDataset::new(data, labels)
}

/// The values and labels of [`synthetic`].
fn synthetic_values() -> (Vec<f32>, Vec<u32>) {
    let mut rng = rumus::rng::Rng::new(7);
    let n = 256;
    let mut data = Vec::with_capacity(n * 16);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let x: Vec<f32> = (0..16).map(|_| 2.0 * rng.uniform() - 1.0).collect();
        let class = (x[0] > 0.0) as u32 * 2 + (x[1] + x[2] > 0.0) as u32;
        labels.push(class);
        data.extend(x);
    }
    (data, labels)
}

/// `n` random MNIST-shaped images with random labels (`--random N`: timing without the data).
fn random_images(n: usize, seed: u64) -> Result<rumus::data::mnist::Mnist> {
    let mut rng = rumus::rng::Rng::new(seed);
    let data = (0..n * 784).map(|_| rng.uniform()).collect();
    let labels = (0..n).map(|_| rng.below(10) as u32).collect();
    ClassDataset::new(data, labels)
}

/// Trains `model` with the settings shared by both jobs, saves what `--out` asks, and
/// prints the rank's summary.
fn train<M, D, V>(dist: &Distributed, model: &mut M, train: &D, test: &D, fit: Fit<V>) -> Result<()>
where
    M: Model,
    V: ValidationFor<M>,
    D: Dataset,
    D::Sample: SampleFor<M::Input>,
    D::Target: TargetFor<M::Output>,
{
    let out = setting("--out").map(PathBuf::from);
    let mut fit = fit;
    if let Some(dir) = &out {
        let template = dir.join("ckpt-{epoch}.safetensors");
        fit = fit.callback(ModelCheckpoint::new(template.to_string_lossy())?).callback(SaveOptimizer(dir.clone()));
    }
    if setting("--exit-rank").and_then(|r| r.parse().ok()) == Some(dist.rank()) {
        fit = fit.callback(ExitAfterFirstEpoch);
    }
    if setting("--nan-rank").and_then(|r| r.parse().ok()) == Some(dist.rank()) {
        fit = fit.callback(NanWeights);
    }
    if let Some(mb) = setting("--bucket-mb").and_then(|v| v.parse::<f32>().ok()) {
        fit = fit.bucket_cap_mb(mb);
    }
    if let Some(k) = setting("--accumulate").and_then(|v| v.parse().ok()) {
        fit = fit.accumulate_grad_batches(k);
    }
    let started = Instant::now();
    let history = model.fit(train, fit.distributed(dist))?;
    let seconds = started.elapsed().as_secs_f64();
    let eval = dist.evaluate(&*model, test)?;
    if let Some(dir) = &out {
        // Every rank asks; only rank 0 writes.
        model.save(dir.join("weights.safetensors"))?;
        history.to_csv(dir.join("history.csv"))?;
        let note = format!("written by rank {} of {}\n", dist.rank(), dist.size());
        rumus::io::write_atomic(&dir.join(format!("rank{}.txt", dist.rank())), note.as_bytes())?;
    }
    let epochs = history.epoch_seconds();
    let last = epochs.last().copied().unwrap_or(0.0);
    println!(
        "rank {} of {}: loss {:.6} test accuracy {:.2}% ({} samples) in {seconds:.2} s, last epoch {last:.3} s",
        dist.rank(),
        dist.size(),
        history.last("loss").unwrap_or(f32::NAN),
        100.0 * eval.accuracy,
        eval.samples,
    );
    if let Some(rounds) = setting("--bench").and_then(|n| n.parse::<usize>().ok()) {
        bench_all_reduce(dist, model, rounds)?;
    }
    Ok(())
}

/// Times `rounds` all-reduces of a bucket as large as the model's gradients.
fn bench_all_reduce<M: Model>(dist: &Distributed, model: &M, rounds: usize) -> Result<()> {
    let scalars: usize = named_parameters(model).iter().map(|(_, p)| p.tensor().numel()).sum::<usize>() + dist.size();
    let mut bucket = vec![1.0f32; scalars];
    dist.collective().all_reduce_sum(&mut bucket, "bench warm-up")?;
    let started = Instant::now();
    for _ in 0..rounds.max(1) {
        dist.collective().all_reduce_sum(&mut bucket, "bench")?;
    }
    let each = started.elapsed().as_secs_f64() / rounds.max(1) as f64;
    println!(
        "rank {}: all-reduce of {scalars} f32 ({:.1} KiB) {:.1} us",
        dist.rank(),
        scalars as f64 * 4.0 / 1024.0,
        each * 1e6
    );
    Ok(())
}

fn main() -> Result<()> {
    let dist = Mpi::init()?;
    // A rank that fails where the others cannot learn of it ends the job instead of leaving
    // them waiting.
    let result = run(&dist);
    dist.abort_on_error(result)
}

fn run(dist: &Distributed) -> Result<()> {
    let epochs = number("--epochs", if flag("--synthetic") { 2 } else { 3 });
    if flag("--synthetic") {
        let batch = number("--batch-size", 8);
        let data = synthetic()?;
        let mut model = Tiny::new(&Device::cpu(), 1 + dist.rank() as u64)?; // rank 0's weights win
                                                                            // F1 and the confusion matrix: their counts are summed over the ranks (not their scores
                                                                            // averaged), so two ranks report the F1 of one.
        let mut fit = Fit::epochs(epochs)
            .batch_size(batch)
            .metrics([Metric::F1, Metric::ConfusionMatrix])
            .verbose(Verbosity::OneLinePerEpoch);
        if flag("--no-shuffle") {
            fit = fit.no_shuffle();
        }
        if flag("--augment") {
            // The samples as 4×4 images, shifted by up to a pixel and mirrored half the time.
            let (values, labels) = synthetic_values();
            let images = ClassDataset::<Shape3<1, 4, 4>, 4>::new(values, labels)?;
            let mut model = TinyImage::new(&Device::cpu(), 1 + dist.rank() as u64)?;
            let fit = fit
                .optimizer(Sgd::new(0.1))
                .augment(Augment::new(number("--augment-seed", 5) as u64).random_crop(1)?.horizontal_flip(0.5)?);
            return train(dist, &mut model, &images, &images, fit);
        }
        fit = if flag("--adam") {
            let mut adam = Adam::new(1e-2);
            resume(dist, &mut model, &mut adam)?;
            fit.optimizer(adam)
        } else {
            let mut sgd = Sgd::new(0.1);
            resume(dist, &mut model, &mut sgd)?;
            fit.optimizer(sgd)
        };
        return train(dist, &mut model, &data, &data, fit);
    }
    let batch = number("--batch-size", 64);
    let device = Device::best();
    let (train_set, test) = match setting("--random").and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => (random_images(n, 1)?, random_images(n.div_ceil(8), 2)?),
        None => rumus::data::mnist::load_or_fetch("data/mnist")?,
    };
    let mut model = LeNet::new(&device, 42)?;
    if dist.is_root() {
        println!("LeNet-5 on {device}, {} ranks ({dist:?}), {batch} samples per rank and step", dist.size());
    }
    let mut fit = Fit::epochs(epochs).batch_size(batch).optimizer(Adam::new(1e-3));
    if let Some(steps) = setting("--steps").and_then(|s| s.parse().ok()) {
        fit = fit.steps_per_epoch(steps);
    }
    if flag("--random") || setting("--random").is_some() {
        // Timing: the epoch is the steps alone.
        return train(dist, &mut model, &train_set, &test, fit);
    }
    train(dist, &mut model, &train_set, &test, fit.validation(&test))
}
