use rumus::prelude::*;

#[model(input = [120])]
pub struct Net {
    body: layers![Reshape(1, 2, 3, 4, 5)],
}

fn main() {}
