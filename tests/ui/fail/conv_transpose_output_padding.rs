use rumus::prelude::*;

#[model(input = [4, 7, 7])]
pub struct Net {
    body: layers![ConvTranspose2d(8, kernel = 3, stride = 2, output_padding = 2)],
}

fn main() {}
