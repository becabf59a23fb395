// A model named by its full `crate::` path.
use rumus::prelude::*;

mod a {
    pub mod b {
        use rumus::prelude::*;

        #[model(input = [8])]
        pub struct Backbone {
            fc: layers![Linear(4)],
        }
    }
}

#[model(input = [2, 8])]
pub struct Net {
    pre: layers![Flatten],
    backbone: crate::a::b::Backbone,
}

fn main() {}
