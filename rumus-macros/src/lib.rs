//! Proc macros for rumus: `#[model]` and `layers!`.
