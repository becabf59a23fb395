use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Residual(Embedding(100, 1), Flatten)],
}

fn main() {}
