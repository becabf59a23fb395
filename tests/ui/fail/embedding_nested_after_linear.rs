// A nested model that starts with an Embedding reads token indices, so it cannot follow a layer.
use rumus::prelude::*;

#[model(input = [16])]
pub struct Tokens {
    embed: layers![Embedding(100, 8), Flatten],
}

#[model(input = [4])]
pub struct Net {
    pre: layers![Linear(16)],
    tokens: Tokens,
}

fn main() {}
