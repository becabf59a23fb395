use rumus::prelude::*;

#[model(input = [6, 7, 7])]
pub struct Net {
    body: layers![ConvTranspose2d(8, kernel = 3, groups = 4)],
}

fn main() {}
