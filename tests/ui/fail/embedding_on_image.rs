use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Embedding(100, 8)],
}

fn main() {}
