use rumus::prelude::*;

#[model(input = [6, 8, 8])]
pub struct Net {
    body: layers![Conv2d(12, kernel = 3, groups = 4)],
}

fn main() {}
