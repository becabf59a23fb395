use rumus::prelude::*;

#[model(input = [28, 28])]
pub struct Net {
    body: layers![Lstm(32, layers = 2, dropout = 1.5)],
}

fn main() {}
