//! Tensors, ops and kernels: values against reference loops, finite-difference gradients, and
//! CPU ↔ wgpu parity of every op and `Backend` kernel (the fused attention and layer norm among
//! them), device memory and host transfers.
//!
//! One test binary of the suite (see "Tests" in docs/ARCHITECTURE.md); each module is one
//! subject, named as its file.

#[path = "../common/mod.rs"]
mod common;

mod add_relu;
mod affine_warp;
mod attention;
mod batch_norm_fused;
mod batch_norm_relu;
mod conv_tensor_cores;
mod core_ops;
mod elementwise_paths;
mod grad_unscale;
mod gradient_views;
mod kernel_profile;
mod layer_norm_fused;
mod losses;
mod ops_nn;
mod optimizer_steps;
mod packed_attention;
mod wgpu_autograd_memory;
mod wgpu_parity;
mod wgpu_training_step;
mod winograd;
