//! Optimizers with PyTorch's semantics (`torch.optim`), learning-rate schedules, gradient
//! clipping and dynamic loss scaling for mixed precision (`torch.amp.GradScaler`).
//!
//! Every optimizer keeps its per-parameter state (momentum, moments ...) as tensors on the
//! parameter's device and updates parameter and state in place through the device's fused
//! optimizer-step kernel (the `optimizer_steps` op): every parameter of a step checked first,
//! then all of them in one backend call, which the wgpu backend runs up to 16 parameters per
//! dispatch (as PyTorch's `foreach` optimizers do); no host round trip.

mod adam;
mod clip;
mod decay_filter;
mod loss_scaler;
mod optimizer;
mod rmsprop;
pub mod schedule;
mod sgd;
mod state;

pub use adam::{Adam, AdamW};
pub use clip::clip_grad_norm;
pub use decay_filter::DecayFilter;
pub use loss_scaler::LossScaler;
pub use optimizer::Optimizer;
pub use rmsprop::RmsProp;
pub use schedule::Schedule;
pub use sgd::Sgd;
pub use state::OptimizerState;
