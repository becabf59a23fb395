use rumus::prelude::*;

type Body = layers![Linear(10), Relu];

fn main() {}
