use rumus::prelude::*;

#[model(input = [3, 32, 32])]
pub struct Net {
    body: layers![Conv2d(8, kernel = 4, padding = same)],
}

fn main() {}
