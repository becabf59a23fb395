use rumus::prelude::*;

#[model(input = [1, 4, 4])]
pub struct Net {
    body: layers![Conv2d(8, kernel = 5)],
}

fn main() {}
