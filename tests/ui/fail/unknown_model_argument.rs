use rumus::prelude::*;

#[model(inputs = [784])]
pub struct Net {
    body: layers![Linear(10)],
}

fn main() {}
