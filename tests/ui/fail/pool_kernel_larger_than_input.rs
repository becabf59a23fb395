use rumus::prelude::*;

#[model(input = [4, 2, 2])]
pub struct Net {
    body: layers![MaxPool2d(3)],
}

fn main() {}
