use rumus::prelude::*;

pub struct Plain;

#[model(input = [8])]
pub struct Net {
    body: layers![Linear(4)],
    tail: Plain,
}

fn main() {}
