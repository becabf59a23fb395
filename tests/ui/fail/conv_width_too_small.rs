use rumus::prelude::*;

#[model(input = [3, 32, 2])]
pub struct Net {
    body: layers![Conv2d(4, kernel = (1, 3))],
}

fn main() {}
