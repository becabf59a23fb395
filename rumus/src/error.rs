//! The one error type of rumus. Messages name the operation, the shapes and the file involved.

use std::path::PathBuf;

/// Everything that can go wrong in rumus, with enough context to act on it.
///
/// ```
/// use rumus::{Device, Error, RawTensor};
///
/// let a = RawTensor::zeros(&[2, 3], &Device::cpu())?;
/// match a.matmul(&a) {
///     Err(Error::Shape { op, detail }) => {
///         assert_eq!(op, "matmul");
///         assert!(detail.contains("[2, 3]"), "the message names the shapes: {detail}");
///     }
///     other => panic!("expected Error::Shape, got {other:?}"),
/// }
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two operands (or an operand and an argument) have shapes the op cannot combine.
    #[error("{op}: {detail}")]
    Shape {
        /// The op that refused its input.
        op: &'static str,
        /// The shapes involved and what was expected.
        detail: String,
    },

    /// An argument is out of its valid range (axis, index, probability, size ...).
    #[error("{op}: invalid argument: {detail}")]
    InvalidArgument {
        /// The op or constructor that refused the argument.
        op: &'static str,
        /// The argument, its value and the valid range.
        detail: String,
    },

    /// A class index or embedding index is outside `0..limit`.
    #[error("{op}: index {index} out of range for size {limit} (at position {position})")]
    IndexOutOfRange {
        /// The op that read the index.
        op: &'static str,
        /// The offending value (negative values are kept as such).
        index: i64,
        /// The exclusive upper bound (classes, vocabulary size, axis length).
        limit: usize,
        /// Where the index sits in its tensor, flat row-major (the first bad one).
        position: usize,
    },

    /// The device cannot allocate a buffer of this many bytes (or it is beyond the device's
    /// limits); nothing was allocated.
    #[error("{op}: cannot allocate {bytes} bytes: {detail}")]
    OutOfMemory {
        /// The op whose allocation failed.
        op: &'static str,
        /// The size asked for, in bytes.
        bytes: u128,
        /// Why: the allocator's refusal, or the limit it exceeds.
        detail: String,
    },

    /// The two operands live on different devices.
    #[error("{op}: operands are on different devices ({lhs} and {rhs}); move one with to_device")]
    DeviceMismatch {
        /// The op given the two operands.
        op: &'static str,
        /// The first operand's device.
        lhs: String,
        /// The second operand's device.
        rhs: String,
    },

    /// The op needs a different element type.
    #[error("{op}: expected dtype {expected}, got {got}")]
    DType {
        /// The op that refused the tensor.
        op: &'static str,
        /// The element type it needs (`"f32"` or `"u32"`).
        expected: &'static str,
        /// The element type it was given.
        got: &'static str,
    },

    /// Backward was called on something it cannot start from.
    #[error("backward: {0}")]
    Autograd(String),

    /// A value became NaN or infinite where a finite value is required.
    #[error("non-finite value: {0}")]
    NonFinite(String),

    /// No GPU adapter, a GPU limit, or a failure reported by the GPU driver.
    #[error("gpu: {0}")]
    Gpu(String),

    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A file exists but its contents are not what they claim to be.
    #[error("{path}: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where in the file.
        detail: String,
    },

    /// Loading a checkpoint found tensors that do not match the model.
    #[error("checkpoint {path}: {detail}")]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// Every problem found (missing, extra, mis-shaped or non-finite tensors ...).
        detail: String,
    },

    /// A dataset or loader was used in a way that cannot yield batches.
    #[error("data: {0}")]
    Data(String),

    /// Training was stopped, with the reason.
    #[error("training stopped: {0}")]
    Training(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Shape { op, detail: detail.into() }
    }

    pub(crate) fn invalid(op: &'static str, detail: impl Into<String>) -> Self {
        Error::InvalidArgument { op, detail: detail.into() }
    }

    /// An allocation of `count` elements of `elem_bytes` each that failed or cannot be made.
    pub(crate) fn out_of_memory(op: &'static str, count: usize, elem_bytes: usize, detail: impl Into<String>) -> Self {
        Error::OutOfMemory { op, bytes: count as u128 * elem_bytes as u128, detail: detail.into() }
    }

    #[allow(dead_code)] // used by data and io loaders
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    #[allow(dead_code)] // used by data and io loaders
    pub(crate) fn format(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Format { path: path.into(), detail: detail.into() }
    }
}
