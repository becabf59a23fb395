use rumus::prelude::*;

#[model(input = [8], forward = custom)]
pub struct Net {
    body: layers![Linear(4)],
}

fn main() {}
