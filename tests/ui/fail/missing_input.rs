use rumus::prelude::*;

#[model]
pub struct Net {
    body: layers![Linear(10)],
}

fn main() {}
