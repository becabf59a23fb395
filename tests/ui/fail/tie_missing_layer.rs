use rumus::prelude::*;

#[model(input = [32])]
pub struct Gpt {
    embed: layers![Embedding(84, 64), PositionalEmbedding(32)],
    head: layers![LayerNorm, Linear(84, bias = false, tie = embed.2)],
}

#[model(input = [32])]
pub struct Misspelt {
    embed: layers![Embedding(84, 64)],
    head: layers![Linear(84, bias = false, tie = embedding.0)],
}

fn main() {}
