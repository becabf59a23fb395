use rumus::prelude::*;

#[model(input = [6, 8, 8])]
pub struct Net {
    body: layers![Conv2d(10, kernel = 3, groups = 3)],
}

fn main() {}
