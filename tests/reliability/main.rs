//! Reliability: precise errors for bad tensors, data and checkpoints, numerics and limits at the
//! edges on both devices, and long runs with bounded memory.
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod checkpoint;
mod data;
mod gpu;
mod long_run;
mod mpi;
mod tensors;
