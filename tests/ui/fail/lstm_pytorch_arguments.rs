use rumus::prelude::*;

#[model(input = [28, 28])]
pub struct Net {
    body: layers![Lstm(28, 128)],
}

fn main() {}
