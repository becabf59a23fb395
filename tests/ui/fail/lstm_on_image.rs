use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Lstm(128, return_sequences = false), Linear(10)],
}

fn main() {}
