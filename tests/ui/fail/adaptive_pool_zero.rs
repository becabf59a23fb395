use rumus::prelude::*;

#[model(input = [3, 8, 8])]
pub struct Net {
    body: layers![AdaptiveAvgPool2d(0)],
}

fn main() {}
