// A model of another crate, imported with `use`.
use rumus::prelude::*;
use rumus_test_models::Backbone;

#[model(input = [3, 8, 8])]
pub struct Net {
    backbone: Backbone,
    head: layers![Linear(10)],
}

fn main() {}
