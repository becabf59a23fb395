use rumus::prelude::*;

#[model(input = [3, 32, 32])]
pub struct Net {
    body: layers![MaxPool2d(2, padding = 2)],
}

fn main() {}
