use rumus::prelude::*;

#[model(input = [4, 1, 1])]
pub struct Net {
    body: layers![ConvTranspose2d(8, kernel = 1, padding = 1)],
}

fn main() {}
