use rumus::prelude::*;

#[model(input = [3, 8, 8])]
pub struct Net {
    body: layers![Upsample(2, mode = bicubic)],
}

fn main() {}
