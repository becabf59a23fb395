//! Which algorithm the wgpu backend's convolutions run: the implicit GEMM of `conv2d.rs`, or
//! Winograd F(2×2, 3×3) (`winograd.rs`) where the geometry allows it. Chosen per backend
//! ([`WgpuBackend::with_conv_algorithm`](super::WgpuBackend::with_conv_algorithm)), by default
//! from `RUMUS_WGPU_CONV`.

use crate::backend::Conv2dArgs;

/// The variable that sets a new backend's [`ConvAlgorithm`] (`auto`, `gemm` or `winograd`).
pub(super) const CONV_ENV: &str = "RUMUS_WGPU_CONV";

/// How the wgpu backend computes a convolution's forward, input gradient and weight gradient.
///
/// Both algorithms run on the GPU; neither falls back to the CPU. Winograd F(2×2, 3×3) applies
/// only to 3×3 kernels at stride 1, dilation 1, without groups and with padding of at most 2
/// (see [`ConvAlgorithm::Winograd`]); every other convolution runs on the implicit GEMM whatever
/// the setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvAlgorithm {
    /// Winograd for eligible convolutions on a hardware adapter where it was measured faster,
    /// per pass: the forward and input gradient from 128 input and output channels, the weight
    /// gradient from 64, every pass from 64 when products run on tensor cores
    /// (`MatmulPrecision::F16TensorCores`; that threshold an estimate not yet measured); the
    /// implicit GEMM otherwise (always on software
    /// adapters such as lavapipe). The default.
    #[default]
    Auto,
    /// The implicit GEMM (`conv2d.wgsl`) for every convolution.
    ImplicitGemm,
    /// Winograd F(2×2, 3×3) for every eligible convolution: input and output transforms around
    /// 16 batched matmuls. An ineligible convolution (another kernel size, a stride, dilation or
    /// groups, padding above 2) runs on the implicit GEMM. An eligible one whose transformed
    /// tiles would exceed the kernels' 32-bit indexing or the adapter's largest buffer is an
    /// error (`Error::Gpu`); `ImplicitGemm` or `Auto` computes it.
    Winograd,
}

impl ConvAlgorithm {
    /// The setting `RUMUS_WGPU_CONV` names: `auto`, `gemm` or `winograd` (any case, spaces
    /// trimmed); unset or empty: `Auto`. Any other value is reported on stderr and `Auto` kept.
    pub(super) fn from_env_value(value: Option<&str>) -> ConvAlgorithm {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("auto") => ConvAlgorithm::Auto,
            Some("gemm") => ConvAlgorithm::ImplicitGemm,
            Some("winograd") => ConvAlgorithm::Winograd,
            Some(other) => {
                eprintln!("rumus: {CONV_ENV}={other:?} is not one of auto, gemm, winograd; using auto");
                ConvAlgorithm::Auto
            }
        }
    }

    /// The setting of the environment, read when a backend is created.
    pub(super) fn from_env() -> ConvAlgorithm {
        ConvAlgorithm::from_env_value(std::env::var(CONV_ENV).ok().as_deref())
    }
}

/// Whether Winograd F(2×2, 3×3) computes `a` exactly as the convolution defines it: a 3×3
/// kernel, stride 1, dilation 1, one group, padding of at most 2 on each side (the input
/// gradient is then the forward convolution of the output gradient at padding 2 − pad), and
/// no empty extent.
pub(super) fn winograd_eligible(a: &Conv2dArgs) -> bool {
    let g = &a.geom;
    (g.kernel_h, g.kernel_w) == (3, 3)
        && (g.stride_h, g.stride_w) == (1, 1)
        && (g.dilation_h, g.dilation_w) == (1, 1)
        && a.groups == 1
        && g.pad_h <= 2
        && g.pad_w <= 2
        && g.batch > 0
        && g.channels > 0
        && a.out_channels > 0
}

/// One of a convolution's three passes, each of which `Auto` decides apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConvPass {
    Forward,
    InputGrad,
    WeightGrad,
}

/// The least input and output channels for which `Auto` takes Winograd for a pass, in f32.
/// On an H100 (`bench_wgpu --resnet18`, batch 128, ms for forward / input gradient / weight
/// gradient, implicit GEMM against Winograd): 64 channels at 32×32, 0.368 / 0.404 / 0.455
/// against 0.404 / 0.404 / 0.372 (run W, 2026-12-07; run V: 0.417 / 0.474 / 0.493 against
/// 0.487 / 0.484 / 0.427), so the weight gradient takes Winograd from 64 channels while the
/// forward and input gradient, whose transforms outweigh 16 small products, keep the GEMM;
/// 128 at 16×16 and wider, Winograd is 1.5–3× faster on every pass.
fn min_channels_f32(pass: ConvPass) -> usize {
    match pass {
        ConvPass::Forward | ConvPass::InputGrad => 128,
        ConvPass::WeightGrad => 64,
    }
}

/// The same on tensor cores (`MatmulPrecision::F16TensorCores`), where Winograd's products run
/// on them and the implicit GEMM stays f32: from 64 channels on every pass. An estimate, not yet
/// a measurement: at 64 channels and 32×32 the f32 Winograd forward (0.404 ms in run W) is
/// mostly its 16 products, which the tensor-core kernel runs at over 3× the f32 kernel's rate
/// (153 against 42 TFLOP/s at 4096³), against the f32 implicit GEMM's 0.368 ms;
/// `bench_wgpu --resnet18` prints the `winograd tc` rows that decide it.
const MIN_CHANNELS_TENSOR_CORES: usize = 64;

/// `Auto`'s rule, in this one place: Winograd for an eligible convolution (see
/// [`winograd_eligible`]) with at least [`min_channels_f32`] (or, with tensor cores,
/// [`MIN_CHANNELS_TENSOR_CORES`]) input and output channels for the pass, on a hardware
/// adapter. Few channels leave the 16 batched matmuls too little work next to the transforms,
/// and on a software adapter (lavapipe) the implicit GEMM keeps CI's tests on their usual path.
/// Measured with `bench_wgpu --resnet18` (rows `conv ... winograd` next to `conv ... gemm`).
pub(super) fn auto_picks_winograd(a: &Conv2dArgs, pass: ConvPass, hardware: bool, tensor_cores: bool) -> bool {
    let least = if tensor_cores { MIN_CHANNELS_TENSOR_CORES } else { min_channels_f32(pass) };
    hardware && winograd_eligible(a) && a.geom.channels >= least && a.out_channels >= least
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ConvGeom;

    #[test]
    fn the_environment_names_an_algorithm_or_auto() {
        assert_eq!(ConvAlgorithm::from_env_value(None), ConvAlgorithm::Auto);
        assert_eq!(ConvAlgorithm::from_env_value(Some("")), ConvAlgorithm::Auto);
        assert_eq!(ConvAlgorithm::from_env_value(Some("auto")), ConvAlgorithm::Auto);
        assert_eq!(ConvAlgorithm::from_env_value(Some("gemm")), ConvAlgorithm::ImplicitGemm);
        assert_eq!(ConvAlgorithm::from_env_value(Some(" Winograd\n")), ConvAlgorithm::Winograd);
        assert_eq!(ConvAlgorithm::from_env_value(Some("WINOGRAD")), ConvAlgorithm::Winograd);
        // A bad value: a warning on stderr and the default.
        assert_eq!(ConvAlgorithm::from_env_value(Some("fft")), ConvAlgorithm::Auto);
        assert_eq!(ConvAlgorithm::from_env_value(Some("implicit")), ConvAlgorithm::Auto);
    }

    #[test]
    fn auto_takes_winograd_per_pass_for_wide_eligible_convolutions_on_hardware() {
        let args = |c: usize, o: usize, kernel: usize, stride: usize, pad: usize| Conv2dArgs {
            geom: ConvGeom::square(2, c, (16, 16), kernel, stride, pad, 1).unwrap(),
            out_channels: o,
            groups: 1,
        };
        let f32_picks = |a: &Conv2dArgs| {
            [ConvPass::Forward, ConvPass::InputGrad, ConvPass::WeightGrad]
                .map(|p| auto_picks_winograd(a, p, true, false))
        };
        let tc_picks = |a: &Conv2dArgs| {
            [ConvPass::Forward, ConvPass::InputGrad, ConvPass::WeightGrad]
                .map(|p| auto_picks_winograd(a, p, true, true))
        };
        assert_eq!(f32_picks(&args(128, 128, 3, 1, 1)), [true; 3]);
        assert_eq!(f32_picks(&args(512, 256, 3, 1, 2)), [true; 3]);
        assert!(
            !auto_picks_winograd(&args(128, 128, 3, 1, 1), ConvPass::Forward, false, false),
            "software adapters keep the GEMM"
        );
        assert!(!auto_picks_winograd(&args(128, 128, 3, 1, 1), ConvPass::WeightGrad, false, true));
        assert_eq!(f32_picks(&args(64, 64, 3, 1, 1)), [false, false, true], "ResNet's first stage");
        assert_eq!(tc_picks(&args(64, 64, 3, 1, 1)), [true; 3], "tensor cores take Winograd's products");
        assert_eq!(f32_picks(&args(32, 64, 3, 1, 1)), [false; 3]);
        assert_eq!(tc_picks(&args(64, 32, 3, 1, 1)), [false; 3]);
        assert_eq!(f32_picks(&args(64, 128, 3, 1, 1)), [false, false, true]);
        assert_eq!(f32_picks(&args(128, 64, 3, 1, 1)), [false, false, true]);
        for a in [args(128, 128, 3, 2, 1), args(128, 128, 1, 1, 0), args(128, 128, 3, 1, 3)] {
            assert_eq!(f32_picks(&a), [false; 3]);
            assert_eq!(tc_picks(&a), [false; 3]);
        }
        assert!(!winograd_eligible(&Conv2dArgs { groups: 2, ..args(64, 64, 3, 1, 1) }));
        assert!(winograd_eligible(&args(3, 5, 3, 1, 0)));
    }
}
