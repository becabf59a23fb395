//! Data augmentation applied on the fly to training batches: [`Augment`], a seeded pipeline of
//! [`RandomCrop`], [`HorizontalFlip`], [`RandomAffine`] and [`Normalize`], whose geometric steps
//! run as one per-sample affine warp of the whole batch on its device.

mod affine_map;
mod augment;
mod geometric;
mod normalize;

pub use augment::Augment;
pub use geometric::{HorizontalFlip, RandomAffine, RandomCrop};
pub use normalize::Normalize;
