use rumus::prelude::*;

#[model(input = [8])]
pub struct Net(layers![Linear(4)]);

fn main() {}
