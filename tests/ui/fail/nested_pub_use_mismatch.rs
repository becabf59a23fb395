// A model re-exported with `pub use` nests through the re-export.
use rumus::prelude::*;

mod a {
    use rumus::prelude::*;

    #[model(input = [8])]
    pub struct Backbone {
        fc: layers![Linear(4)],
    }
}

pub mod zoo {
    pub use crate::a::Backbone;
}

#[model(input = [16])]
pub struct Net {
    backbone: zoo::Backbone,
}

fn main() {}
