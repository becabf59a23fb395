use rumus::prelude::*;

#[model(input = [10])]
pub struct Net {
    body: layers![Reshape(3, -1)],
}

fn main() {}
