use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    #[input = [8]]
    body: layers![Linear(4)],
}

fn main() {}
