use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Conv2d(3 => 8, kernel = 3)],
}

fn main() {}
