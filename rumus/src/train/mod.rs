//! Training: `fit`, `evaluate`, `predict`, callbacks, progress and history, with Keras' names
//! and defaults.
//!
//! ```text
//! let (train, test) = rumus::data::mnist::load_or_fetch("data/mnist")?;
//! let mut stopper = EarlyStopping::new("val_f1").patience(3).restore_best_weights(true);
//! let history = model.fit(&train, Fit::epochs(10).batch_size(64)
//!     .optimizer(Adam::new(1e-3))
//!     .schedule(CosineAnnealing { t_max: 10, eta_min: 0.0 })
//!     .metrics([Metric::F1, Metric::TopK(3), Metric::ConfusionMatrix])
//!     .validation(&test)
//!     .callback(&mut stopper)
//!     .callback(ModelCheckpoint::new("runs/ckpt-{epoch:02}-{val_loss:.4}.safetensors")?.save_best_only(true)))?;
//! println!("best epoch {:?}", stopper.best_epoch());
//! history.plot("curves.svg")?;
//! history.plot_metric("f1", "f1.svg")?; // f1 and val_f1
//! println!("{}", history.val_confusion_matrix().unwrap());
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
//! Metrics besides the loss are chosen with [`Fit::metrics`]: top-k accuracy, macro precision,
//! recall and F1 (per class in [`History::per_class`]), a [`ConfusionMatrix`] and MAE
//! ([`Metric`]).
//!
//! The loop never reads the device in a training step except for the progress line: the
//! epoch's loss sum, correct counts and per-class counts are accumulated as tensors on the
//! device and read once every `progress_every` steps (progress-bar mode) or once per epoch.

mod accumulate;
mod build_warning;
mod callback;
mod class_counts;
mod config;
mod confusion_matrix;
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
mod metric;
mod metrics;
mod model_checkpoint;
mod plot;
mod progress;
mod reduce_lr_on_plateau;
mod significant;
mod snapshot;
mod terminate_on_nan;

pub use callback::{Callback, Mode, TrainContext};
pub use class_counts::ClassCounts;
pub use config::{Fit, NoValidation, ValidationData, ValidationFor, Verbosity};
pub use confusion_matrix::ConfusionMatrix;
pub use csv_logger::CsvLogger;
pub use early_stopping::EarlyStopping;
pub(crate) use evaluate::evaluate_dataset;
pub use evaluate::{evaluate, evaluate_with, predict, EvalSettings, Evaluation};
pub use file_template::FileTemplate;
pub use fit::fit;
pub use history::History;
pub use logs::Logs;
pub use loss::{CustomLoss, Loss, LossFn};
pub use lr_scheduler::LearningRateScheduler;
pub use metric::{Metric, MAX_CONFUSION_CLASSES};
pub(crate) use metrics::Reading;
pub use model_checkpoint::ModelCheckpoint;
pub use reduce_lr_on_plateau::ReduceLROnPlateau;
pub use snapshot::WeightSnapshot;
pub use terminate_on_nan::TerminateOnNaN;
