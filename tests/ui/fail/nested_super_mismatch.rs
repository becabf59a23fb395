// A model of the parent module, named through `super::`.
use rumus::prelude::*;

#[model(input = [8])]
struct Backbone {
    fc: layers![Linear(4)],
}

mod child {
    use rumus::prelude::*;

    #[model(input = [8])]
    pub struct Net {
        backbone: super::Backbone,
        head: layers![Linear(2)],
        again: super::Backbone,
    }
}

fn main() {}
