//! Layers, optimizers and `#[model]` code at run time: PyTorch names and layouts, shape rules,
//! initialisation, the transformer layers and generation, optimizer update rules.
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod conv_family;
mod fused_relu;
mod layers;
mod macro_gpt;
mod macro_modules;
mod macro_runtime;
mod norms;
mod norms_fixture;
mod optim;
mod recurrent;
mod recurrent_fixture;
mod residual;
mod resnet;
mod transformer_layers;
