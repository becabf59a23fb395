//! Datasets and batching.
//!
//! A [`Dataset`] yields typed batches: inputs as `Tensor<Sample>` and targets as a raw tensor
//! whose kind ([`Class`] indices or [`Regression`] values) is part of the type, so `fit` can
//! reject at compile time a dataset that does not fit the model.

mod char_tokenizer;
#[cfg(feature = "csv")]
mod csv_dataset;
mod dataset;
pub mod fashion_mnist;
mod fetch;
mod idx;
#[cfg(feature = "image-folder")]
mod image_folder;
mod in_memory;
mod loader;
pub mod mnist;
pub mod shakespeare;
mod target;
mod text_windows;
pub mod transforms;

pub use char_tokenizer::CharTokenizer;
#[cfg(feature = "csv")]
pub use csv_dataset::CsvDataset;
pub use dataset::{Dataset, SampleFor};
pub use idx::{parse_idx, read_idx, IdxArray};
#[cfg(feature = "image-folder")]
pub use image_folder::ImageFolder;
pub use in_memory::{ClassDataset, TensorDataset};
pub use loader::{Batch, DataLoader};
pub use target::{Class, Regression, SeqClass, Target, TargetFor, TargetKind};
pub use text_windows::{TextWindows, DEFAULT_TRAIN_FRACTION};
