//! The house rules, checked on the sources: the layering of docs/ARCHITECTURE.md, paths the
//! docs name, and every WGSL kernel validated and translated by naga (no GPU needed).
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod checks;
mod shaders_translate;
mod shaders_validate;
mod test_layout;
