use rumus::prelude::*;

#[model(input = [3, 4])]
pub struct Net {
    body: layers![Conv1d(8, kernel = 5)],
}

fn main() {}
