//! How much precision f32 matmuls may trade for speed (PyTorch's `allow_tf32`).

use std::fmt;

/// The arithmetic of f32 matrix products on a device, set with
/// [`Device::set_matmul_precision`](crate::Device::set_matmul_precision).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// f32 inputs and f32 accumulation everywhere: the default.
    #[default]
    F32,
    /// Inputs rounded to f16 and multiplied on tensor cores, accumulated in f32 (wgpu adapters
    /// with cooperative matrices, such as NVIDIA GPUs). f16 keeps TF32's 10-bit mantissa but
    /// has a 5-bit exponent: inputs past ±65504 become infinite and ones below about 6e-8
    /// become zero, so training in this mode wants loss scaling
    /// ([`LossScaler`](crate::optim::LossScaler), `Fit::loss_scaler`). Convolutions that run on
    /// Winograd (`ConvAlgorithm`) with at least 128 input and output channels take their batched
    /// products here too; narrower ones and implicit-GEMM convolutions stay f32. Products whose operands the tensor-core kernel cannot read as vec4s
    /// (a contiguous side or a stride not a multiple of 4) still run in f32. The first such
    /// product compiles the tensor-core kernel, which NVIDIA's driver can take tens of seconds
    /// over (BENCHMARKS.md); its shader disk cache keeps it for later runs.
    F16TensorCores,
}

impl fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatmulPrecision::F32 => "f32",
            MatmulPrecision::F16TensorCores => "f16 tensor-core",
        })
    }
}
