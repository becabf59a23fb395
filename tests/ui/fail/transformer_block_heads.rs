use rumus::prelude::*;

// 384 / 7 is not whole: the block cannot split the embedding into 7 heads.
#[model(input = [256])]
pub struct Gpt {
    embed: layers![Embedding(84, 384), PositionalEmbedding(256)],
    blocks: layers![Repeat(6, TransformerBlock(7))],
}

fn main() {}
