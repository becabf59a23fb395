use rumus::prelude::*;

#[model(input = [1, 12, 12])]
pub struct Net {
    body: layers![Conv2d(16, kernel = 5), MaxPool2d(2), Flatten, Linear(400 => 120)],
}

fn main() {}
