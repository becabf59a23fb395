// A model imported with `use` nests by its bare name; the shape error is the outer model's.
use rumus::prelude::*;

mod a {
    use rumus::prelude::*;

    #[model(input = [8])]
    pub struct Backbone {
        fc: layers![Linear(4)],
    }
}

use a::Backbone;

#[model(input = [16])]
pub struct Net {
    backbone: Backbone,
}

fn main() {
    let _ = Net::new(&Device::cpu(), 0);
}
