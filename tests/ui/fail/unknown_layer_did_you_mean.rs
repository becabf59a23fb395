use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Conv2D(6, kernel = 5)],
}

fn main() {}
