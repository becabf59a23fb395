// nanoGPT's shakespeare_char model (issue #29), declared with the DSL: 6 blocks through Repeat,
// the head tied to the token embedding, 10.78M parameters counted once.
use rumus::data::{SeqClass, TargetFor};
use rumus::prelude::*;

#[model(input = [256])]
pub struct Gpt {
    embed: layers![Embedding(84, 384, std = 0.02), PositionalEmbedding(256), Dropout(0.2)],
    blocks: layers![Repeat(6, TransformerBlock(6, dropout = 0.2))],
    head: layers![LayerNorm, Linear(84, bias = false, tie = embed.0)],
}

/// The model is trained on per-token targets.
fn trains_on<M: Model, T: TargetFor<M::Output>>() {}

fn main() -> rumus::Result<()> {
    trains_on::<Gpt, SeqClass<256, 84>>();
    assert_eq!((Gpt::INPUT, Gpt::OUTPUT), (&[256][..], &[256, 84][..]));
    assert_eq!(Gpt::TRAINABLE_PARAMS, 10_778_112);
    let gpt = Gpt::new(&Device::cpu(), 1337)?;
    assert_eq!(rumus::nn::count_trainable(&gpt), Gpt::TRAINABLE_PARAMS);
    let names: Vec<String> = gpt.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.first().map(String::as_str), Some("embed.0.weight"));
    assert!(names.iter().any(|n| n == "blocks.5.mlp.c_proj.bias"));
    assert!(!names.iter().any(|n| n == "head.1.weight"), "the tied weight is listed once");
    assert!(Gpt::summary().contains(" blocks.5 (TransformerBlock)"));
    Ok(())
}
