// A downsampling block written without its shortcut: the hint gives the projection.
use rumus::prelude::*;

#[model(input = [64, 32, 32])]
pub struct Net {
    block: layers![
        Residual(
            Conv2d(128, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu,
            Conv2d(128, 3, padding = 1, bias = false), BatchNorm2d
        ),
        Relu,
    ],
}

fn main() {}
