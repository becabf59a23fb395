//! Training: `fit`, `evaluate`, `predict`, callbacks, progress and history, with Keras' names
//! and defaults.
//!
//! ```text
//! let (train, test) = rumus::data::mnist::load_or_fetch("data/mnist")?;
//! let history = model.fit(&train, Fit::epochs(10).batch_size(64)
//!     .optimizer(Adam::new(1e-3))
//!     .schedule(CosineAnnealing { t_max: 10, eta_min: 0.0 })
//!     .validation(&test)
//!     .callback(EarlyStopping::new("val_loss").patience(3).restore_best_weights(true))
//!     .callback(ModelCheckpoint::new("ckpt-{epoch:02}-{val_loss:.4}.safetensors")?.save_best_only(true)))?;
//! history.plot("curves.svg")?;
//! println!("{:.2}%", 100.0 * model.evaluate(&test)?.accuracy);
//! ```
//!
//! A language model trains the same way: a dataset of token windows with
//! [`SeqClass<T, V>`](crate::data::SeqClass) targets fits a model with output `[T, V]`, and the
//! loss and accuracies are means over tokens. nanoGPT's settings read
//! `Fit::epochs(50).batch_size(64).steps_per_epoch(100).accumulate_grad_batches(1)
//! .optimizer(AdamW::new(1e-3).betas(0.9, 0.99).weight_decay(0.1).decay_matrices_only())
//! .schedule(WarmupCosine::new(100, 1e-4)).clip_grad_norm(1.0)` (`rumus::optim::schedule::WarmupCosine`).
//!
//! The loop never reads the device in a training step except for the progress line: the
//! epoch's loss sum and correct counts are accumulated as tensors on the device and read once
//! every `progress_every` steps (progress-bar mode) or once per epoch.

mod accumulate;
mod build_warning;
mod callback;
mod config;
mod csv_logger;
mod early_stopping;
mod epoch_batches;
mod evaluate;
mod file_template;
mod finite;
mod fit;
mod history;
mod logs;
mod loss;
mod lr_scheduler;
mod metrics;
mod model_checkpoint;
mod plot;
mod progress;
mod reduce_lr_on_plateau;
mod snapshot;
mod terminate_on_nan;

pub use callback::{Callback, Mode, TrainContext};
pub use config::{Fit, NoValidation, ValidationData, ValidationFor, Verbosity};
pub use csv_logger::CsvLogger;
pub use early_stopping::EarlyStopping;
pub(crate) use evaluate::evaluate_dataset;
pub use evaluate::{evaluate, evaluate_with, predict, EvalSettings, Evaluation};
pub use file_template::FileTemplate;
pub use fit::fit;
pub use history::History;
pub use logs::Logs;
pub use loss::Loss;
pub use lr_scheduler::LearningRateScheduler;
pub use model_checkpoint::ModelCheckpoint;
pub use reduce_lr_on_plateau::ReduceLROnPlateau;
pub use snapshot::WeightSnapshot;
pub use terminate_on_nan::TerminateOnNaN;
