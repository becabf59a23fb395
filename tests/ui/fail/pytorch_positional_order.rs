// PyTorch's positional orders, Python's `False` and quoted words get hints in our terms.
use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    features: layers![Conv2d(1, 6, 5), MaxPool2d(2, 2), Flatten],
    head: layers![Linear(864, 10), Linear(10, bias = False)],
}

#[model(input = [16, 64])]
pub struct Attn {
    body: layers![MultiHeadAttention(64, 8)],
}

#[model(input = [1, 28, 28])]
pub struct Quoted {
    body: layers![Conv2d(6, kernel = 3, padding = "same")],
}

fn main() {}
