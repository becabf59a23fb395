use rumus::prelude::*;

#[model(input = [784])]
pub struct Net {
    body: layers![Linear(10), Dropout(1.5)],
}

fn main() {}
