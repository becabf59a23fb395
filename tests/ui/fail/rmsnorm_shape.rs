use rumus::prelude::*;

#[model(input = [10, 32])]
pub struct Net {
    body: layers![RmsNorm(64)],
}

fn main() {}
