use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Linear(16), Embedding(100, 8)],
}

fn main() {}
