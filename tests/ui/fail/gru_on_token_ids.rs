use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Gru(32)],
}

fn main() {}
