use rumus::prelude::*;

#[model(input = [16])]
pub struct Net {
    body: layers![Residual(Linear(32), Relu)],
}

fn main() {}
