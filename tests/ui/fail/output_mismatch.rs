use rumus::prelude::*;

#[model(input = [8], output = [5])]
pub struct Net {
    body: layers![Linear(4)],
}

fn main() {}
