use rumus::prelude::*;

#[model(input = [28, 28])]
pub struct Net {
    body: layers![Linear(784 => 128), Relu, Linear(10)],
}

fn main() {}
