use rumus::prelude::*;

#[model(input = [8])]
pub enum Net {
    A,
}

fn main() {}
