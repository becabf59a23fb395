use rumus::prelude::*;

#[model(input = [3, 16])]
pub struct Net {
    body: layers![MaxPool1d(2, padding = 2)],
}

fn main() {}
