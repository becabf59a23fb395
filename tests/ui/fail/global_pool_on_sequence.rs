use rumus::prelude::*;

#[model(input = [3, 16])]
pub struct Net {
    body: layers![GlobalAvgPool],
}

fn main() {}
