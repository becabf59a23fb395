use rumus::prelude::*;

#[model(input = [784])]
pub struct Net {
    body: layers![Linear(0)],
}

fn main() {}
