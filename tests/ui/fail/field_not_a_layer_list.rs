use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    body: Vec<f32>,
}

fn main() {}
