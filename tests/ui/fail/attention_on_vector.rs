use rumus::prelude::*;

#[model(input = [64])]
pub struct Net {
    body: layers![MultiHeadAttention(4)],
}

fn main() {}
