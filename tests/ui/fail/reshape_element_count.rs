use rumus::prelude::*;

#[model(input = [16, 4, 4])]
pub struct Net {
    body: layers![Flatten, Reshape(3, 10)],
}

fn main() {}
