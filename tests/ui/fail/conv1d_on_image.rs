use rumus::prelude::*;

#[model(input = [3, 8, 8])]
pub struct Net {
    body: layers![Conv1d(8, kernel = 3)],
}

fn main() {}
