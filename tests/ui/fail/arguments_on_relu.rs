use rumus::prelude::*;

#[model(input = [784])]
pub struct Net {
    body: layers![Linear(10), Relu(3)],
}

fn main() {}
