use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Conv2d(6, kernel = 5, kernel = 3)],
}

fn main() {}
