use rumus::prelude::*;

#[model(input = [8])]
pub struct Net<T> {
    body: layers![Linear(4)],
    extra: T,
}

fn main() {}
