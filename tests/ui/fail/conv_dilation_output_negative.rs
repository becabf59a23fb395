use rumus::prelude::*;

#[model(input = [1, 8, 8])]
pub struct Net {
    body: layers![Conv2d(4, kernel = 3, dilation = 4)],
}

fn main() {}
