use rumus::prelude::*;

#[model(input = [1, 2, 3, 4, 5])]
pub struct Net {
    body: layers![Flatten],
}

fn main() {}
