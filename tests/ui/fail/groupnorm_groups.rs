use rumus::prelude::*;

#[model(input = [3, 8, 8])]
pub struct Net {
    body: layers![Conv2d(16, kernel = 3), GroupNorm(3)],
}

fn main() {}
