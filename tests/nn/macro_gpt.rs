//! A GPT declared with `#[model]` (issue #29) at a tiny size: `Repeat` copies, the tied head,
//! the `depth` and seeds the macro passes, parameter names and counts against the summary, and the
//! generated `forward_cached` against the uncached forward.

use rumus::nn::{named_parameters, named_params, KvCache, Module, Param, TransformerBlock};
use rumus::prelude::*;
use rumus::testing::assert_close;

#[model(input = [16])]
pub struct TinyGpt {
    embed: layers![Embedding(11, 8, std = 0.02), PositionalEmbedding(16), Dropout(0.1)],
    blocks: layers![Repeat(2, TransformerBlock(2, dropout = 0.1))],
    head: layers![LayerNorm, Linear(11, bias = false, tie = embed.0)],
}

/// The same layers with a custom forward: cached decoding is then the user's to write.
#[model(input = [16], output = [16, 11], forward = custom)]
pub struct CustomGpt {
    embed: layers![Embedding(11, 8)],
    head: layers![Linear(11)],
}

impl CustomGpt {
    pub fn forward(&self, x: &Tensor<Shape1<16>>) -> Result<Tensor<Shape2<16, 11>>> {
        self.forward_head(&self.forward_embed(x)?)
    }
}

/// Token ids `[batch, len]`, deterministic and below the vocabulary of 11.
fn ids(batch: usize, len: usize, offset: usize) -> Vec<u32> {
    (0..batch * len).map(|i| ((i / len * 7 + (i % len + offset) * 5 + 3) % 11) as u32).collect()
}

fn tokens(data: &[u32], batch: usize, len: usize) -> Result<RawTensor> {
    RawTensor::from_indices(data, &[batch, len], &Device::cpu())
}

fn param(module: &dyn Module, name: &str) -> Param {
    named_params(module)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("no parameter {name}"))
}

#[test]
fn builds_and_maps_token_ids_to_per_position_logits() -> Result<()> {
    let mut gpt = TinyGpt::new(&Device::cpu(), 1)?;
    gpt.eval();
    let x: Tensor<Shape1<16>> = Tensor::from_raw(tokens(&ids(3, 16, 0), 3, 16)?)?;
    let y: Tensor<Shape2<16, 11>> = gpt.forward(&x)?;
    assert_eq!(y.raw().shape(), &[3, 16, 11]);
    assert!(y.raw().to_vec()?.iter().all(|v| v.is_finite()));
    assert_eq!(TinyGpt::OUTPUT, &[16, 11]);
    Ok(())
}

#[test]
fn parameter_names_and_counts_agree_with_the_summary() -> Result<()> {
    let gpt = TinyGpt::new(&Device::cpu(), 1)?;
    let block = |i: usize| {
        [
            "ln_1.weight",
            "ln_1.bias",
            "attn.c_attn.weight",
            "attn.c_attn.bias",
            "attn.c_proj.weight",
            "attn.c_proj.bias",
            "ln_2.weight",
            "ln_2.bias",
            "mlp.c_fc.weight",
            "mlp.c_fc.bias",
            "mlp.c_proj.weight",
            "mlp.c_proj.bias",
        ]
        .map(|n| format!("blocks.{i}.{n}"))
    };
    let mut want: Vec<String> = vec!["embed.0.weight".into(), "embed.1.weight".into()];
    want.extend(block(0));
    want.extend(block(1));
    want.extend(["head.0.weight".into(), "head.0.bias".into()]);
    let mut got: Vec<String> = gpt.named_parameters().into_iter().map(|(n, _)| n).collect();
    let (mut want_sorted, want_order) = (want.clone(), want);
    got.sort();
    want_sorted.sort();
    assert_eq!(got, want_sorted);
    // The state dict lists the tied weight under both names, the head's last.
    let state: Vec<String> = named_params(&gpt).into_iter().map(|(n, _)| n).collect();
    assert_eq!(state.len(), want_order.len() + 1);
    assert_eq!(state.last().map(String::as_str), Some("head.1.weight"));

    // E = 8: embeddings 11·8 + 16·8, blocks 2 · (12·64 + 13·8), final norm 2·8; the head adds none.
    let count: usize = gpt.parameters().iter().map(|p| p.tensor().numel()).sum();
    assert_eq!(count, 88 + 128 + 2 * 872 + 16);
    assert_eq!(TinyGpt::TRAINABLE_PARAMS, count);
    assert_eq!(TinyGpt::TOTAL_PARAMS, count);
    let summary = TinyGpt::summary();
    assert!(summary.contains("Trainable params: 1,976\n"), "{summary}");
    for row in [
        " blocks.0 (TransformerBlock)",
        " blocks.1 (TransformerBlock)",
        " head.1 (Linear, weight of embed.0)",
        " embed.1 (PositionalEmbedding)",
    ] {
        assert!(summary.contains(row), "{row} missing:\n{summary}");
    }
    assert!(!summary.contains("blocks.2"), "{summary}");
    // Each summary row's count adds up to the total, and the tied head shows 0.
    let rows: usize = summary
        .lines()
        .filter(|l| l.contains('(') && !l.contains("Layer (type)"))
        .filter_map(|l| l.split_whitespace().last())
        .map(|n| n.replace(',', "").parse::<usize>().unwrap_or(0))
        .sum();
    assert_eq!(rows, count);
    Ok(())
}

#[test]
fn the_head_shares_the_embedding_weight() -> Result<()> {
    let gpt = TinyGpt::new(&Device::cpu(), 2)?;
    let (embed, head) = (param(&gpt, "embed.0.weight"), param(&gpt, "head.1.weight"));
    assert!(embed.same_tensor(&head));
    assert_eq!(head.shape(), &[11, 8]);
    let fresh: Vec<f32> = (0..88).map(|i| i as f32 * 0.01 - 0.3).collect();
    embed.assign(&RawTensor::from_vec(fresh.clone(), &[11, 8], &Device::cpu())?)?;
    assert_eq!(head.to_vec()?, fresh);
    let other: Vec<f32> = fresh.iter().map(|v| -v).collect();
    head.assign(&RawTensor::from_vec(other.clone(), &[11, 8], &Device::cpu())?)?;
    assert_eq!(embed.to_vec()?, other);
    // Counted once by everything that steps parameters.
    assert_eq!(named_parameters(&gpt).iter().filter(|(_, p)| p.same_tensor(&embed)).count(), 1);
    Ok(())
}

/// Each Repeat copy is built with its own derived seed and with `depth` = the model's number of
/// blocks (2), exactly as a hand-built `TransformerBlock` with those arguments.
#[test]
fn repeat_copies_get_their_own_seed_and_the_model_depth() -> Result<()> {
    let seed = 5;
    let gpt = TinyGpt::new(&Device::cpu(), seed)?;
    // Seeds are numbered over the layers that draw one: Embedding 0, PositionalEmbedding 1,
    // Dropout 2, the blocks 3 and 4.
    for (copy, k) in [(0, 3), (1, 4)] {
        let block = TransformerBlock::new(&Device::cpu(), 8, 2, 0.1, true, 2, rumus::__private::derive_seed(seed, k))?;
        for (name, p) in named_params(&block) {
            let got = param(&gpt, &format!("blocks.{copy}.{name}")).to_vec()?;
            assert_eq!(got, p.to_vec()?, "blocks.{copy}.{name}");
        }
    }
    let (a, b) = (param(&gpt, "blocks.0.attn.c_attn.weight"), param(&gpt, "blocks.1.attn.c_attn.weight"));
    assert_ne!(a.to_vec()?, b.to_vec()?);
    Ok(())
}

#[test]
fn forward_cached_over_two_chunks_equals_the_full_forward() -> Result<()> {
    let mut gpt = TinyGpt::new(&Device::cpu(), 3)?;
    gpt.eval();
    let (batch, split) = (2, 10);
    let all = ids(batch, 16, 0);
    let full = gpt.forward_raw(&tokens(&all, batch, 16)?)?;
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for row in all.chunks(16) {
        first.extend_from_slice(&row[..split]);
        second.extend_from_slice(&row[split..]);
    }
    let mut cache = KvCache::new();
    let a = gpt.forward_cached(&tokens(&first, batch, split)?, &mut cache)?;
    cache.end_pass(split);
    let b = gpt.forward_cached(&tokens(&second, batch, 16 - split)?, &mut cache)?;
    cache.end_pass(16 - split);
    assert_eq!(a.shape(), &[batch, split, 11]);
    assert_eq!(b.shape(), &[batch, 16 - split, 11]);
    let joined = RawTensor::concat(&[&a, &b], 1)?;
    assert_close("cached vs full logits", &joined.to_vec()?, &full.to_vec()?, 1e-4);
    // The cache now holds all 16 positions: one more is past the model's sequence length.
    let err = gpt.forward_cached(&tokens(&[0, 0], batch, 1)?, &mut cache).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(err.to_string().contains("the cache's 16 positions plus t at most 16"), "{err}");
    Ok(())
}

#[test]
fn a_custom_forward_has_no_derived_cached_decoding() -> Result<()> {
    let model = CustomGpt::new(&Device::cpu(), 0)?;
    let x = tokens(&ids(1, 4, 0), 1, 4)?;
    let err = model.forward_cached(&x, &mut KvCache::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("forward = custom"), "{err}");
    Ok(())
}

/// `generate` runs on the generated `forward_cached`: greedy cached decoding picks the same
/// tokens as `generate_uncached` (which re-runs `forward_raw` on the prompt so far, shorter than
/// the block) while the sequence fits in the block; sampling past the block refills the cache.
#[test]
fn generate_with_the_cache_matches_generate_without() -> Result<()> {
    let gpt = TinyGpt::new(&Device::cpu(), 4)?;
    let prompt = [1, 5, 2, 7];
    let greedy = Generate::new(6).temperature(0.0);
    let cached = gpt.generate(&prompt, &greedy)?;
    assert_eq!(cached.len(), prompt.len() + 6);
    assert_eq!(&cached[..4], &prompt);
    assert!(cached.iter().all(|t| *t < 11));
    assert_eq!(cached, gpt.generate_uncached(&prompt, &greedy)?);
    // Sampling runs past the block length without an error.
    let long = gpt.generate(&prompt, &Generate::new(20).temperature(0.8).seed(3))?;
    assert_eq!(long.len(), 24);
    Ok(())
}

/// A sequence model's untyped `forward_raw` also takes a shorter sequence (a prompt), and the
/// causal model's logits for it are the first rows of the full sequence's; other shapes are
/// errors.
#[test]
fn forward_raw_on_a_prefix_equals_the_first_rows() -> Result<()> {
    let mut gpt = TinyGpt::new(&Device::cpu(), 6)?;
    gpt.eval();
    let all = ids(1, 16, 2);
    let full = gpt.forward_raw(&tokens(&all, 1, 16)?)?;
    let prefix = gpt.forward_raw(&tokens(&all[..5], 1, 5)?)?;
    assert_eq!(prefix.shape(), &[1, 5, 11]);
    assert_close("prefix logits", &prefix.to_vec()?, &full.narrow(1, 0, 5)?.to_vec()?, 1e-4);
    for bad in [vec![1, 17], vec![1, 16, 1], vec![16]] {
        let n = bad.iter().product();
        let err = gpt.forward_raw(&RawTensor::from_indices(&vec![0; n], &bad, &Device::cpu())?).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{bad:?}: {err}");
    }
    Ok(())
}
