use rumus::prelude::*;

#[model(input = [3, 28, 28])]
pub struct Net {
    body: layers![Conv2d(6, kernel = 3), BatchNorm2d(8)],
}

fn main() {}
