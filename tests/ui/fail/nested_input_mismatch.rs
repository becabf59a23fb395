use rumus::prelude::*;

#[model(input = [8])]
pub struct Head {
    body: layers![Linear(4), Relu, Linear(2)],
}

#[model(input = [1, 28, 28])]
pub struct Net {
    features: layers![Conv2d(4, kernel = 3), MaxPool2d(2), Flatten],
    head: Head,
}

fn main() {}
