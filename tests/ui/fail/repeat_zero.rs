use rumus::prelude::*;

#[model(input = [32])]
pub struct Gpt {
    embed: layers![Embedding(84, 64)],
    blocks: layers![Repeat(0, TransformerBlock(4))],
}

fn main() {}
