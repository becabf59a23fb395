//! `#[model]` structs declared in a crate of their own, so the suite can check that a model
//! nests from another crate (tests/nn/macro_modules.rs, tests/ui/*/nested_from_another_crate.rs).

use rumus::prelude::*;

/// Models in a module, re-exported at the crate root.
pub mod vision {
    use rumus::prelude::*;

    /// `[1, 8, 8]` → `[18]` features.
    #[model(input = [1, 8, 8])]
    pub struct Backbone {
        /// One convolution, pooled and flattened.
        pub conv: layers![Conv2d(2, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }
}

pub use vision::Backbone;

/// `[16]` token indices → `[16, 4]`.
#[model(input = [16])]
pub struct TokenEmbedder {
    /// The embedding table.
    pub embed: layers![Embedding(50, 4)],
}
