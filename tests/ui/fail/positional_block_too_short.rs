use rumus::prelude::*;

#[model(input = [256])]
pub struct Gpt {
    embed: layers![Embedding(84, 64), PositionalEmbedding(128)],
    blocks: layers![TransformerBlock(4)],
}

fn main() {}
