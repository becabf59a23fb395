use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Embedding(100, 30), MultiHeadAttention(4)],
}

fn main() {}
