//! Checkpoints in the safetensors format, with PyTorch's parameter names and layouts, so a
//! `state_dict` saved by PyTorch (`safetensors.torch.save_file`) loads into the equivalent rumus
//! model and back. Writes are atomic: a failed save never destroys the previous file.

mod atomic;
mod checkpoint;
mod optimizer_state;
mod writer_rank;

#[cfg(feature = "fetch")]
pub(crate) use atomic::write_atomic_always;
pub use atomic::{write_atomic, write_atomic_with};
pub use checkpoint::{load_module, module_from_bytes, module_to_bytes, save_module};
pub use optimizer_state::{load_optimizer, save_optimizer};
#[cfg(feature = "mpi")]
pub(crate) use writer_rank::set_writes_files;
pub use writer_rank::writes_files;
