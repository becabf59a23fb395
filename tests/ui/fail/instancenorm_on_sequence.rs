use rumus::prelude::*;

#[model(input = [4, 10])]
pub struct Net {
    body: layers![InstanceNorm2d],
}

fn main() {}
