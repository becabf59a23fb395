use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    body: layers![Linear(10) Relu],
}

fn main() {}
