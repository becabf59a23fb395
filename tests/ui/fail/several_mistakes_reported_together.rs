use rumus::prelude::*;

// After the first shape error, later layers' names and arguments are still checked.
#[model(input = [1, 28, 28])]
pub struct Net {
    features: layers![Conv2d(6, kernel = 5), Relu, MaxPool2d(2), Linear(10), Dropuot(0.5)],
    head: layers![Linear(10, bais = false), Residual(Lineer(10))],
}

fn main() {}
