use rumus::prelude::*;

// The head maps 64 features to 80 logits, but the embedding table is 84 x 64.
#[model(input = [32])]
pub struct Gpt {
    embed: layers![Embedding(84, 64), PositionalEmbedding(32)],
    head: layers![LayerNorm, Linear(80, bias = false, tie = embed.0)],
}

fn main() {}
