use rumus::prelude::*;

#[model(input = [28, 28])]
pub struct Net {
    body: layers![Gru(0)],
}

fn main() {}
