//! Data and training end to end: datasets and loaders (MNIST, Fashion-MNIST, Shakespeare),
//! `fit` and its callbacks on the CPU and on wgpu, checkpoints and PyTorch interchange.
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod augment;
mod callbacks;
mod checkpoint;
mod data;
mod distributed;
mod fetch;
mod file_datasets;
mod fit_losses;
mod gpt_fixture;
mod gpt_learns;
mod loss_scaling;
mod metrics;
mod seq_training;
mod text_data;
mod training;
mod wgpu_fit;
