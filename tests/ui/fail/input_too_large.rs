use rumus::prelude::*;

#[model(input = [4294967296])]
pub struct Net {
    body: layers![Linear(4)],
}

fn main() {}
