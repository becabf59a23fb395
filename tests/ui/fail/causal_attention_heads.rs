use rumus::prelude::*;

#[model(input = [64])]
pub struct Net {
    body: layers![Embedding(84, 48), CausalSelfAttention(5, dropout = 0.1)],
}

fn main() {}
