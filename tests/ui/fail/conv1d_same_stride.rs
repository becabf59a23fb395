use rumus::prelude::*;

#[model(input = [3, 16])]
pub struct Net {
    body: layers![Conv1d(8, kernel = 3, stride = 2, padding = same)],
}

fn main() {}
