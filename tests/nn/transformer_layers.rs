//! The transformer layers (positional embedding, causal self-attention, the GPT block), the
//! key/value cache and generation: parameter names and counts, cached against uncached passes,
//! CPU against wgpu, finite-difference gradients and the errors.

use rumus::generate::{Generate, Generation};
use rumus::nn::{
    count_trainable, join_name, named_params, CausalSelfAttention, Embedding, KvCache, LayerNorm, Linear, Module,
    MultiHeadAttention, Param, PositionalEmbedding, Residual, Sequential, TransformerBlock,
};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};

use crate::common::param_grad_check::param_grad_check;
use rumus::{no_grad, Device, Error, Model, RawTensor, Result, Shape1, Shape2};

fn cpu() -> Device {
    Device::cpu()
}

fn randn(shape: &[usize], seed: u64, device: &Device) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, device).unwrap()
}

/// `(name, shape)` of every parameter, in visiting order.
fn names_and_shapes(module: &dyn Module) -> Vec<(String, Vec<usize>)> {
    named_params(module).into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect()
}

fn entry(name: &str, shape: &[usize]) -> (String, Vec<usize>) {
    (name.to_string(), shape.to_vec())
}

/// Mean and standard deviation of a tensor's values.
fn moments(values: &[f32]) -> (f32, f32) {
    let n = values.len() as f32;
    let mean = values.iter().sum::<f32>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, var.sqrt())
}

#[test]
fn block_parameters_follow_nanogpt() -> Result<()> {
    let e = 16;
    let block = TransformerBlock::new(&cpu(), e, 4, 0.1, true, 6, 7)?;
    assert_eq!(
        names_and_shapes(&block),
        vec![
            entry("ln_1.weight", &[e]),
            entry("ln_1.bias", &[e]),
            entry("attn.c_attn.weight", &[3 * e, e]),
            entry("attn.c_attn.bias", &[3 * e]),
            entry("attn.c_proj.weight", &[e, e]),
            entry("attn.c_proj.bias", &[e]),
            entry("ln_2.weight", &[e]),
            entry("ln_2.bias", &[e]),
            entry("mlp.c_fc.weight", &[4 * e, e]),
            entry("mlp.c_fc.bias", &[4 * e]),
            entry("mlp.c_proj.weight", &[e, 4 * e]),
            entry("mlp.c_proj.bias", &[e]),
        ]
    );
    assert_eq!(count_trainable(&block), 12 * e * e + 13 * e);
    assert_eq!(block.describe(), "TransformerBlock(embed = 16, heads = 4, dropout = 0.1)");

    let no_bias = TransformerBlock::new(&cpu(), e, 4, 0.0, false, 6, 7)?;
    let names: Vec<String> = names_and_shapes(&no_bias).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "ln_1.weight",
            "attn.c_attn.weight",
            "attn.c_proj.weight",
            "ln_2.weight",
            "mlp.c_fc.weight",
            "mlp.c_proj.weight"
        ]
    );
    assert_eq!(count_trainable(&no_bias), 12 * e * e + 2 * e);
    Ok(())
}

#[test]
fn the_gpt_sizes_give_nanogpts_block_parameters() -> Result<()> {
    // nanoGPT's shakespeare_char: 6 blocks, 384 wide, 6 heads: 1,774,464 scalars per block.
    let block = TransformerBlock::new(&cpu(), 384, 6, 0.2, true, 6, 1)?;
    assert_eq!(count_trainable(&block), 1_774_464);
    assert_eq!(6 * count_trainable(&block), 10_646_784);
    Ok(())
}

#[test]
fn attention_and_position_parameters() -> Result<()> {
    let attn = CausalSelfAttention::new(&cpu(), 8, 2, 0.0, true, 2, 3)?;
    assert_eq!(
        names_and_shapes(&attn),
        vec![
            entry("c_attn.weight", &[24, 8]),
            entry("c_attn.bias", &[24]),
            entry("c_proj.weight", &[8, 8]),
            entry("c_proj.bias", &[8])
        ]
    );
    assert_eq!(attn.describe(), "CausalSelfAttention(embed = 8, heads = 2, dropout = 0)");
    let pos = PositionalEmbedding::new(&cpu(), 256, 384, 0.02, 5)?;
    assert_eq!(names_and_shapes(&pos), vec![entry("weight", &[256, 384])]);
    assert_eq!(pos.describe(), "PositionalEmbedding(256, 384)");
    let (mean, std) = moments(&pos.weight.to_vec()?);
    assert!(mean.abs() < 0.002 && (std - 0.02).abs() < 0.001, "mean {mean}, std {std}");
    let wte = Embedding::with_std(&cpu(), 84, 384, 0.02, 5)?;
    let (mean, std) = moments(&wte.weight.to_vec()?);
    assert!(mean.abs() < 0.002 && (std - 0.02).abs() < 0.001, "mean {mean}, std {std}");
    Ok(())
}

#[test]
fn nanogpt_initialisation() -> Result<()> {
    let (e, depth) = (64, 6);
    let block = TransformerBlock::new(&cpu(), e, 4, 0.0, true, depth, 11)?;
    let residual = 0.02 / (2.0 * depth as f32).sqrt();
    for (name, p) in named_params(&block) {
        let (mean, std) = moments(&p.to_vec()?);
        let want = match name.as_str() {
            "attn.c_proj.weight" | "mlp.c_proj.weight" => residual,
            n if n.ends_with(".weight") && n.starts_with("ln_") => {
                assert!(p.to_vec()?.iter().all(|&v| v == 1.0), "{name}");
                continue;
            }
            n if n.ends_with(".weight") => 0.02,
            _ => {
                assert!(p.to_vec()?.iter().all(|&v| v == 0.0), "{name} is not zero");
                continue;
            }
        };
        assert!(
            mean.abs() < 0.1 * want && (std - want).abs() < 0.1 * want,
            "{name}: mean {mean}, std {std}, want {want}"
        );
    }
    // Same seed, same block; another seed, other weights.
    let again = TransformerBlock::new(&cpu(), e, 4, 0.0, true, depth, 11)?;
    let other = TransformerBlock::new(&cpu(), e, 4, 0.0, true, depth, 12)?;
    assert_eq!(again.attn.c_attn.weight.to_vec()?, block.attn.c_attn.weight.to_vec()?);
    assert_ne!(other.attn.c_attn.weight.to_vec()?, block.attn.c_attn.weight.to_vec()?);
    Ok(())
}

#[test]
fn forward_shapes_and_the_causal_mask() -> Result<()> {
    let d = cpu();
    let block = TransformerBlock::new(&d, 8, 2, 0.0, true, 2, 3)?;
    let x = randn(&[2, 5, 8], 1, &d);
    let y = block.forward_raw(&x)?;
    assert_eq!(y.shape(), &[2, 5, 8]);
    // Causal: the first 3 positions do not depend on the last 2.
    let prefix = block.forward_raw(&x.narrow(1, 0, 3)?.contiguous()?)?;
    assert_close("causal prefix", &prefix.to_vec()?, &y.narrow(1, 0, 3)?.contiguous()?.to_vec()?, 1e-5);
    let pos = PositionalEmbedding::new(&d, 6, 8, 1.0, 4)?;
    let z = pos.forward_raw(&x)?;
    let (xs, zs, ws) = (x.to_vec()?, z.to_vec()?, pos.weight.to_vec()?);
    for (i, (&zv, &xv)) in zs.iter().zip(&xs).enumerate() {
        let (t, c) = ((i / 8) % 5, i % 8);
        assert_eq!(zv, xv + ws[t * 8 + c]);
    }
    Ok(())
}

/// A two-block GPT written by hand (what `#[model]` will generate): token and position
/// embeddings, blocks, final layer norm, linear head. `T` tokens in, `[T, V]` logits out.
struct TinyGpt<const T: usize, const V: usize> {
    wte: Embedding,
    wpe: PositionalEmbedding,
    blocks: Vec<TransformerBlock>,
    ln_f: LayerNorm,
    lm_head: Linear,
}

impl<const T: usize, const V: usize> TinyGpt<T, V> {
    fn new(device: &Device, embed: usize, heads: usize, dropout: f32, seed: u64) -> Result<Self> {
        let depth = 2;
        Ok(TinyGpt {
            wte: Embedding::with_std(device, V, embed, 1.0, seed)?,
            wpe: PositionalEmbedding::new(device, T, embed, 1.0, seed + 1)?,
            blocks: (0..depth)
                .map(|i| TransformerBlock::new(device, embed, heads, dropout, true, depth, seed + 2 + i as u64))
                .collect::<Result<_>>()?,
            ln_f: LayerNorm::new(device, &[embed], 1e-5, true)?,
            lm_head: Linear::new(device, embed, V, false, seed + 9)?,
        })
    }
}

impl<const T: usize, const V: usize> Module for TinyGpt<T, V> {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let mut h = self.wpe.forward_raw(&self.wte.forward_raw(x)?)?;
        for block in &self.blocks {
            h = block.forward_raw(&h)?;
        }
        self.lm_head.forward_raw(&self.ln_f.forward_raw(&h)?)
    }
    fn forward_cached(&self, x: &RawTensor, cache: &mut KvCache) -> Result<RawTensor> {
        let mut h = self.wpe.forward_cached(&self.wte.forward_raw(x)?, cache)?;
        for block in &self.blocks {
            h = block.forward_cached(&h, cache)?;
        }
        self.lm_head.forward_raw(&self.ln_f.forward_raw(&h)?)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.wte.visit_params(&join_name(prefix, "wte"), visitor);
        self.wpe.visit_params(&join_name(prefix, "wpe"), visitor);
        for (i, block) in self.blocks.iter().enumerate() {
            block.visit_params(&join_name(prefix, &format!("h.{i}")), visitor);
        }
        self.ln_f.visit_params(&join_name(prefix, "ln_f"), visitor);
        self.lm_head.visit_params(&join_name(prefix, "lm_head"), visitor);
    }
    fn set_training(&mut self, training: bool) {
        self.blocks.iter_mut().for_each(|b| b.set_training(training));
    }
    fn describe(&self) -> String {
        "TinyGpt".into()
    }
}

impl<const T: usize, const V: usize> Model for TinyGpt<T, V> {
    type Input = Shape1<T>;
    type Output = Shape2<T, V>;
}

/// The same GPT with only `forward_raw`: its `forward_cached` (the default) ignores the cache.
struct ForgetfulGpt(TinyGpt<16, 11>);

impl Module for ForgetfulGpt {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.0.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.0.visit_params(prefix, visitor)
    }
    fn describe(&self) -> String {
        "ForgetfulGpt".into()
    }
}

impl Model for ForgetfulGpt {
    type Input = Shape1<16>;
    type Output = Shape2<16, 11>;
}

/// Runs `module` on `x [n, 8, ...]` as a prefill of 5 positions then 3 single steps, and
/// returns the outputs joined along time.
fn prefill_then_steps(module: &dyn Module, x: &RawTensor) -> Result<RawTensor> {
    let mut cache = KvCache::new();
    let mut outs = Vec::new();
    for (start, end) in [(0, 5), (5, 6), (6, 7), (7, 8)] {
        outs.push(module.forward_cached(&x.narrow(1, start, end)?.contiguous()?, &mut cache)?);
        cache.end_pass(end - start);
    }
    assert_eq!(cache.position(), 8);
    RawTensor::concat(&outs.iter().collect::<Vec<_>>(), 1)
}

fn token_batch(device: &Device) -> Result<RawTensor> {
    let ids: Vec<u32> = (0..16u32).map(|i| (i * 7 + 3) % 11).collect();
    RawTensor::from_indices(&ids, &[2, 8], device)
}

fn cached_forward_matches_full_forward_on(device: &Device) -> Result<()> {
    let gpt = TinyGpt::<16, 11>::new(device, 8, 2, 0.0, 21)?;
    let x = token_batch(device)?;
    let full = no_grad(|| gpt.forward_raw(&x))?;
    let cached = no_grad(|| prefill_then_steps(&gpt, &x))?;
    assert_eq!(cached.shape(), &[2, 8, 11]);
    assert_close("TinyGpt cached vs full", &cached.to_vec()?, &full.to_vec()?, 1e-5);

    let mha = MultiHeadAttention::new(device, 8, 2, 4)?.causal(true);
    let h = randn(&[2, 8, 8], 6, device);
    let full = no_grad(|| mha.forward_raw(&h))?;
    let cached = no_grad(|| prefill_then_steps(&mha, &h))?;
    assert_close("causal MultiHeadAttention cached vs full", &cached.to_vec()?, &full.to_vec()?, 1e-5);

    // Containers pass the cache down: a pre-norm residual attention and an MLP in a Sequential.
    let attention = Sequential::new()
        .with(LayerNorm::new(device, &[8], 1e-5, true)?)
        .with(MultiHeadAttention::new(device, 8, 4, 8)?.causal(true));
    let stack = Sequential::new()
        .with(PositionalEmbedding::new(device, 8, 8, 1.0, 2)?)
        .with(Residual::new(attention))
        .with(TransformerBlock::new(device, 8, 2, 0.0, false, 2, 5)?)
        .with(Linear::new(device, 8, 3, true, 6)?);
    let full = no_grad(|| stack.forward_raw(&h))?;
    let cached = no_grad(|| prefill_then_steps(&stack, &h))?;
    assert_close("Sequential cached vs full", &cached.to_vec()?, &full.to_vec()?, 1e-5);
    Ok(())
}

#[test]
fn cached_forward_matches_full_forward_cpu() -> Result<()> {
    cached_forward_matches_full_forward_on(&cpu())
}

#[test]
fn cached_forward_matches_full_forward_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    cached_forward_matches_full_forward_on(&gpu)
}

#[test]
fn causal_multi_head_attention_hides_later_positions() -> Result<()> {
    let d = cpu();
    let plain = MultiHeadAttention::new(&d, 8, 2, 4)?;
    let causal = MultiHeadAttention::new(&d, 8, 2, 4)?.causal(true);
    assert!(!plain.is_causal() && causal.is_causal());
    assert_eq!(causal.describe(), "MultiHeadAttention(embed_dim = 8, num_heads = 2, causal)");
    let x = randn(&[1, 4, 8], 2, &d);
    let (a, b) = (plain.forward_raw(&x)?.to_vec()?, causal.forward_raw(&x)?.to_vec()?);
    // The last position sees everything either way; the first sees only itself when causal.
    assert_close("last position", &b[24..], &a[24..], 1e-5);
    assert!(a[..8].iter().zip(&b[..8]).any(|(p, q)| (p - q).abs() > 1e-3));
    let first = causal.forward_raw(&x.narrow(1, 0, 1)?.contiguous()?)?.to_vec()?;
    assert_close("first position alone", &b[..8], &first, 1e-5);
    Ok(())
}

/// Greedy decoding by the documented rule, with full passes only: the context of each token is
/// the window the cache would hold (the last `T` tokens at first, refilled from the last `T / 2`
/// when full).
fn greedy_by_the_rule<const T: usize, const V: usize>(
    gpt: &TinyGpt<T, V>,
    prompt: &[u32],
    new: usize,
) -> Result<Vec<u32>> {
    let mut seq = prompt.to_vec();
    let mut start = seq.len().saturating_sub(T);
    let mut held = 0;
    for _ in 0..new {
        if held == 0 {
            held = seq.len() - start;
        } else if held >= T {
            start = seq.len() - T / 2;
            held = T / 2;
        } else {
            held += 1;
        }
        let window = &seq[start..];
        assert_eq!(window.len(), held);
        let x = RawTensor::from_indices(window, &[1, window.len()], &cpu())?;
        let logits = no_grad(|| gpt.forward_raw(&x))?.to_vec()?;
        let last = &logits[(window.len() - 1) * V..];
        let best = last.iter().enumerate().fold(0, |b, (i, &v)| if v > last[b] { i } else { b });
        seq.push(best as u32);
    }
    Ok(seq)
}

#[test]
fn cached_generation_equals_uncached_below_the_block() -> Result<()> {
    let gpt = TinyGpt::<16, 11>::new(&cpu(), 8, 2, 0.0, 5)?;
    let prompt = [1, 4, 7];
    // 3 + 13 = 16 tokens: the cache never fills.
    let greedy = Generate::new(13).temperature(0.0);
    let cached = gpt.generate(&prompt, &greedy)?;
    assert_eq!(cached.len(), 16);
    assert_eq!(&cached[..3], &prompt);
    assert_eq!(cached, gpt.generate_uncached(&prompt, &greedy)?);
    assert_eq!(cached, gpt.generate(&prompt, &Generate::new(13).top_k(1).seed(9))?);
    assert_eq!(cached, greedy_by_the_rule(&gpt, &prompt, 13)?);
    for seed in [1, 2, 3] {
        let sampled = Generate::new(13).temperature(1.5).top_k(6).seed(seed);
        let cached = gpt.generate(&prompt, &sampled)?;
        assert_eq!(cached, gpt.generate_uncached(&prompt, &sampled)?, "seed {seed}");
        assert_eq!(cached, gpt.generate(&prompt, &sampled)?, "seed {seed}: the same seed repeats");
        assert!(cached.iter().all(|&t| t < 11));
    }
    let a = gpt.generate(&prompt, &Generate::new(13).seed(1))?;
    let b = gpt.generate(&prompt, &Generate::new(13).seed(2))?;
    assert_ne!(a, b, "different seeds sample different text");
    Ok(())
}

#[test]
fn cached_generation_equals_uncached_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let gpt = TinyGpt::<16, 11>::new(&gpu, 8, 2, 0.0, 5)?;
    for settings in [Generate::new(10).temperature(0.0), Generate::new(10).top_k(5).seed(3)] {
        let cached = gpt.generate(&[1, 4, 7], &settings)?;
        assert_eq!(cached.len(), 13);
        assert_eq!(cached, gpt.generate_uncached(&[1, 4, 7], &settings)?, "{settings:?}");
    }
    Ok(())
}

#[test]
fn generation_past_the_block_refills_from_half_the_block() -> Result<()> {
    let gpt = TinyGpt::<8, 11>::new(&cpu(), 8, 2, 0.0, 7)?;
    // A prompt longer than the block keeps its last 8 tokens; 30 new tokens refill the cache
    // several times.
    let prompt: Vec<u32> = (0..10).map(|i| i % 11).collect();
    let greedy = Generate::new(30).temperature(0.0);
    let cached = gpt.generate(&prompt, &greedy)?;
    assert_eq!(cached.len(), 40);
    assert_eq!(cached, greedy_by_the_rule(&gpt, &prompt, 30)?);
    // The sliding window of the uncached reference is another context once past the block,
    // but both agree until the cache first fills.
    let uncached = gpt.generate_uncached(&prompt, &greedy)?;
    assert_eq!(uncached.len(), 40);
    assert_eq!(cached[..11], uncached[..11]);
    assert_eq!(gpt.generate(&prompt, &Generate::new(0))?, prompt);
    Ok(())
}

#[test]
fn generation_runs_in_eval_mode() -> Result<()> {
    // Dropout 0.5 in training mode: generate ignores it (EvalGuard) and leaves the mode alone.
    let training = TinyGpt::<16, 11>::new(&cpu(), 8, 2, 0.5, 5)?;
    let mut eval = TinyGpt::<16, 11>::new(&cpu(), 8, 2, 0.5, 5)?;
    eval.set_training(false);
    let settings = Generate::new(10).seed(4);
    assert_eq!(training.generate(&[2, 3], &settings)?, eval.generate(&[2, 3], &settings)?);
    let x = token_batch(&cpu())?;
    let (a, b) = (training.forward_raw(&x)?.to_vec()?, training.forward_raw(&x)?.to_vec()?);
    assert_ne!(a, b, "still training: each call draws a new dropout mask");
    assert_eq!(eval.forward_raw(&x)?.to_vec()?, eval.forward_raw(&x)?.to_vec()?);
    Ok(())
}

#[test]
fn generation_errors() {
    let gpt = TinyGpt::<16, 11>::new(&cpu(), 8, 2, 0.0, 5).unwrap();
    let invalid = |r: Result<Vec<u32>>| match r {
        Err(Error::InvalidArgument { op: "generate", detail }) => detail,
        other => panic!("expected an InvalidArgument from generate, got {other:?}"),
    };
    let ok = Generate::new(3);
    assert!(invalid(gpt.generate(&[], &ok)).contains("prompt is empty"));
    assert!(invalid(gpt.generate_uncached(&[], &ok)).contains("prompt is empty"));
    assert!(matches!(
        gpt.generate(&[1, 11], &ok),
        Err(Error::IndexOutOfRange { op: "generate", index: 11, limit: 11, position: 1 })
    ));
    assert!(invalid(gpt.generate(&[1], &ok.temperature(-0.5))).contains("temperature -0.5"));
    assert!(invalid(gpt.generate(&[1], &ok.temperature(f32::NAN))).contains("temperature NaN"));
    assert!(invalid(gpt.generate(&[1], &ok.temperature(f32::INFINITY))).contains("temperature inf"));
    assert!(invalid(gpt.generate(&[1], &ok.top_k(0))).contains("top_k 0"));
    // A model whose forward_cached ignores the cache is refused, not sampled from.
    let forgetful = ForgetfulGpt(gpt);
    assert!(invalid(forgetful.generate(&[1, 2], &ok)).contains("must implement forward_cached"));
    assert_eq!(forgetful.generate_uncached(&[1, 2], &ok.temperature(0.0)).unwrap().len(), 5);
}

#[test]
fn positional_embedding_gradients_match_finite_differences() -> Result<()> {
    let pos = PositionalEmbedding::new(&cpu(), 6, 3, 1.0, 2)?;
    let x = randn(&[2, 4, 3], 8, &cpu());
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |inputs| pos.forward_raw(&inputs[0]))?;
    param_grad_check(&pos, &x)?;
    // Rows past t get no gradient; rows below get the sum over the batch.
    let out = pos.forward_raw(&x)?;
    let grads = out.sum_all()?.backward()?;
    let g = grads.get(pos.weight.tensor()).unwrap().to_vec()?;
    assert_eq!(&g[..12], &[2.0; 12]);
    assert_eq!(&g[12..], &[0.0; 6]);
    Ok(())
}

#[test]
fn block_gradients_match_finite_differences() -> Result<()> {
    let block = TransformerBlock::new(&cpu(), 8, 2, 0.0, true, 2, 13)?;
    // Larger weights than the 0.02 init, so that every path carries a visible gradient.
    for (i, (_, p)) in named_params(&block).into_iter().enumerate() {
        p.assign(&p.tensor().detach().add(&randn(p.shape(), 100 + i as u64, &cpu()).mul_scalar(0.3)?)?)?;
    }
    let x = randn(&[2, 5, 8], 9, &cpu());
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |inputs| block.forward_raw(&inputs[0]))?;
    param_grad_check(&block, &x)
}

/// A block's output and the gradients of its input and every parameter, on the host.
fn block_forward_and_grads(device: &Device) -> Result<Vec<(String, Vec<f32>)>> {
    let block = TransformerBlock::new(device, 8, 2, 0.0, true, 2, 17)?;
    for (i, (_, p)) in named_params(&block).into_iter().enumerate() {
        p.assign(&randn(p.shape(), 200 + i as u64, &cpu()).mul_scalar(0.3)?)?;
    }
    let x = randn(&[2, 5, 8], 3, &cpu()).to_device(device)?.requires_grad_()?;
    let y = block.forward_raw(&x)?;
    let w = RawTensor::rand_uniform(y.shape(), 0.5, 1.5, 1, &cpu())?.to_device(device)?;
    let grads = y.mul(&w)?.sum_all()?.backward()?;
    let mut out = vec![("output".to_string(), y.to_vec()?), ("grad x".to_string(), grads.get(&x).unwrap().to_vec()?)];
    for (name, p) in named_params(&block) {
        out.push((format!("grad {name}"), grads.get(p.tensor()).unwrap().to_vec()?));
    }
    Ok(out)
}

#[test]
fn block_forward_and_gradients_match_on_cpu_and_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let (cpu_side, gpu_side) = (block_forward_and_grads(&cpu())?, block_forward_and_grads(&gpu)?);
    assert_eq!(cpu_side.len(), 14);
    for ((name, want), (_, got)) in cpu_side.iter().zip(&gpu_side) {
        assert!(want.iter().any(|&v| v != 0.0), "{name} is all zero");
        assert_close(name, got, want, 1e-4);
    }
    Ok(())
}

#[test]
fn layer_errors_name_the_values() -> Result<()> {
    let d = cpu();
    let pos = PositionalEmbedding::new(&d, 4, 3, 0.02, 1)?;
    let err = pos.forward_raw(&randn(&[1, 5, 3], 1, &d)).unwrap_err();
    assert_eq!(err.to_string(), "PositionalEmbedding: a sequence of t = 5 positions exceeds the block of 4");
    assert!(matches!(pos.forward_raw(&randn(&[1, 2, 4], 1, &d)), Err(Error::Shape { .. })));
    let mut cache = KvCache::new();
    pos.forward_cached(&randn(&[1, 3, 3], 1, &d), &mut cache)?;
    cache.end_pass(3);
    pos.forward_cached(&randn(&[1, 1, 3], 1, &d), &mut cache)?;
    cache.end_pass(1);
    let err = pos.forward_cached(&randn(&[1, 1, 3], 1, &d), &mut cache).unwrap_err();
    assert_eq!(err.to_string(), "PositionalEmbedding: t = 1 new positions after 4 cached ones exceed the block of 4");
    assert!(PositionalEmbedding::new(&d, 0, 3, 0.02, 1).is_err());
    assert!(PositionalEmbedding::new(&d, 4, 3, f32::NAN, 1).is_err());
    assert!(Embedding::with_std(&d, 4, 3, -1.0, 1).is_err());

    let err = CausalSelfAttention::new(&d, 10, 3, 0.0, true, 1, 1).err().unwrap();
    assert_eq!(
        err.to_string(),
        "CausalSelfAttention: invalid argument: heads 3 must divide the embedding size 10 (both positive)"
    );
    let err = TransformerBlock::new(&d, 10, 4, 0.0, true, 1, 1).err().unwrap();
    assert!(err.to_string().contains("heads 4 must divide the embedding size 10"), "{err}");
    assert!(TransformerBlock::new(&d, 8, 2, 1.5, true, 1, 1).is_err());
    assert!(TransformerBlock::new(&d, 8, 2, 0.0, true, 0, 1).is_err());
    let block = TransformerBlock::new(&d, 8, 2, 0.0, true, 1, 1)?;
    assert_eq!(
        block.forward_raw(&randn(&[1, 3, 6], 1, &d)).unwrap_err().to_string(),
        "TransformerBlock: input [1, 3, 6]: expected [batch, time, 8]"
    );

    // A cache whose position disagrees with the keys held, or another batch size, is refused.
    let mut cache = KvCache::new();
    block.forward_cached(&randn(&[1, 3, 8], 1, &d), &mut cache)?;
    cache.end_pass(4);
    let err = block.forward_cached(&randn(&[1, 1, 8], 1, &d), &mut cache).unwrap_err();
    assert!(err.to_string().contains("position 4 but this layer holds 3 positions"), "{err}");
    let mut cache = KvCache::new();
    block.forward_cached(&randn(&[1, 3, 8], 1, &d), &mut cache)?;
    cache.end_pass(3);
    let err = block.forward_cached(&randn(&[2, 1, 8], 1, &d), &mut cache).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "CausalSelfAttention", .. }), "{err}");
    Ok(())
}
