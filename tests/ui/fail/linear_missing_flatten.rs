use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    features: layers![Conv2d(6, kernel = 5), Relu, MaxPool2d(2)],
    head: layers![Linear(120), Relu, Linear(10)],
}

fn main() {}
