//! Kernel parameters: each shader family's uniform `struct Params` as a `#[repr(C)]` Pod
//! struct with the same fields in the same order, declared with [`kernel_params!`], and the
//! layout (field names and byte offsets) that ties it to its shaders: a dispatch checks that the
//! shader takes this struct, and `tests/house/shaders_validate.rs` checks the layout against the WGSL.

use super::encoder::PARAM_BYTES;

/// Field names and byte offsets of one `Params` struct, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    /// The Rust struct's name (e.g. `"SoftmaxParams"`), for error messages.
    pub name: &'static str,
    /// Size in bytes, a multiple of 16 (WGSL's uniform alignment).
    pub size: usize,
    /// `(field, byte offset)` in declaration order; padding fields (named `_pad`) are left out.
    pub fields: &'static [(&'static str, usize)],
}

/// A kernel's uniform parameters (binding 0), written as raw bytes into the dispatch's slot.
pub(crate) trait KernelParams: bytemuck::Pod {
    const LAYOUT: ParamLayout;
}

/// Compile-time checks of a parameter struct: its size a multiple of 16 bytes (the WGSL
/// uniform struct's alignment, padded with explicit `_pad` fields) and within one slot.
pub(crate) const fn check_size(size: usize) -> usize {
    assert!(size.is_multiple_of(16), "kernel parameters must be padded to 16 bytes");
    assert!(size <= PARAM_BYTES, "kernel parameters exceed one parameter slot");
    size
}

/// Declares `struct $name` (fields mirroring a WGSL `struct Params`, then an optional `_pad`
/// of u32 words to the 16-byte boundary) and its [`KernelParams`] layout.
macro_rules! kernel_params {
    (
        $(#[$meta:meta])*
        struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty),* $(,)? } $(pad $pad:literal)?
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
        pub(crate) struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            $(pub _pad: [u32; $pad],)?
        }

        impl $crate::backend::wgpu::params::KernelParams for $name {
            const LAYOUT: $crate::backend::wgpu::params::ParamLayout = $crate::backend::wgpu::params::ParamLayout {
                name: stringify!($name),
                size: $crate::backend::wgpu::params::check_size(std::mem::size_of::<$name>()),
                fields: &[$((stringify!($field), std::mem::offset_of!($name, $field))),*],
            };
        }
    };
}

pub(crate) use kernel_params;
