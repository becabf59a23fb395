use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Conv2d(6, kernel = 5), MaxPool2d(2), Conv2d(16, kernel = 5), MaxPool2d(2), Conv2d(32, kernel = 5)],
}

fn main() {}
