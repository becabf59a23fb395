use rumus::prelude::*;

#[model(input = [10, 32])]
pub struct Net {
    body: layers![LayerNorm(64)],
}

fn main() {}
