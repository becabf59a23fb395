//! Issue #27's hardening: bad input at every layer of the library is an error, never a panic,
//! an abort, a hang or a wrong answer (shape arithmetic, the wgpu backend, files, training).
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod gpu;
mod io;
mod tensors;
mod train;
