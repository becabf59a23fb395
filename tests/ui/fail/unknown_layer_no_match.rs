use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Transformer(4)],
}

fn main() {}
