use rumus::prelude::*;

#[model(input = [64])]
pub struct Net {
    body: layers![AvgPool2d(2)],
}

fn main() {}
