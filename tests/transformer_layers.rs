//! The transformer layers (positional embedding, causal self-attention, the GPT block), the
//! key/value cache and generation: parameter names and counts, cached against uncached passes,
//! CPU against wgpu, finite-difference gradients and the errors.

use rumus::nn::{
    count_trainable, named_params, CausalSelfAttention, Embedding, KvCache, Module, MultiHeadAttention,
    PositionalEmbedding, TransformerBlock,
};
use rumus::testing::assert_close;
use rumus::{no_grad, Device, Error, RawTensor, Result};

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
