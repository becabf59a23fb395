use rumus::prelude::*;

#[model(input = [10])]
pub struct Net {
    body: layers![Softmax(axis = 1)],
}

fn main() {}
