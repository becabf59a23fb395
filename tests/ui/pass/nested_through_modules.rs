// Nested models reached every way Rust names a type: `use`, `pub use`, a glob, full `crate::`
// paths, `super::`, a renaming `use .. as ..`, and a private model nested from a child module.
use rumus::prelude::*;

mod blocks {
    use rumus::prelude::*;

    #[model(input = [1, 8, 8])]
    pub struct Backbone {
        pub conv: layers![Conv2d(2, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }

    #[model(input = [18])]
    pub struct Head {
        pub fc: layers![Linear(4)],
    }

    #[model(input = [4])]
    pub(crate) struct Tail {
        fc: layers![Linear(2)],
    }

    // A private model, nested from a child module through `super::`.
    #[model(input = [2])]
    struct Private {
        fc: layers![Linear(2)],
    }

    pub mod child {
        use rumus::prelude::*;

        #[model(input = [2])]
        pub struct UsesSuper {
            inner: super::Private,
        }
    }
}

// `pub use` re-exports the model (its macro goes with it).
pub mod zoo {
    pub use crate::blocks::{Backbone, Head};
}

use blocks::Backbone;
use blocks::Head as Classifier;

#[model(input = [1, 8, 8])]
pub struct ThroughUse {
    backbone: Backbone,
    head: Classifier,
    tail: crate::blocks::Tail,
}

#[model(input = [1, 8, 8])]
pub struct ThroughPubUse {
    backbone: zoo::Backbone,
    head: self::zoo::Head,
}

mod globbed {
    use crate::blocks::*;
    use rumus::prelude::*;

    #[model(input = [1, 8, 8])]
    pub struct ThroughGlob {
        backbone: Backbone,
        head: Head,
        tail: Tail,
        last: child::UsesSuper,
    }
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let x = Tensor::<Shape3<1, 8, 8>>::randn(2, 0, &device)?;
    let a: Tensor<Shape1<2>> = ThroughUse::new(&device, 1)?.forward(&x)?;
    let b: Tensor<Shape1<4>> = ThroughPubUse::new(&device, 1)?.forward(&x)?;
    let c: Tensor<Shape1<2>> = globbed::ThroughGlob::new(&device, 1)?.forward(&x)?;
    assert_eq!((a.shape(), b.shape(), c.shape()), (&[2, 2][..], &[2, 4][..], &[2, 2][..]));
    assert_eq!(ThroughUse::TRAINABLE_PARAMS, 20 + (18 * 4 + 4) + (4 * 2 + 2));
    Ok(())
}
