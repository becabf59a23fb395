use rumus::prelude::*;

#[model(input = [10])]
pub struct Net {
    body: layers![Linear(32), BatchNorm2d],
}

fn main() {}
