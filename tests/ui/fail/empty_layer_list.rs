use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    body: layers![],
}

fn main() {}
