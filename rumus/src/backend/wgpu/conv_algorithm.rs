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
    /// Winograd for eligible convolutions with at least 128 input and 128 output channels on a
    /// hardware adapter, the implicit GEMM otherwise (always on software adapters such as
    /// lavapipe). The default.
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

/// The least input and output channels for which `Auto` takes Winograd. On an H100 (2026-12-06,
/// `bench_wgpu --resnet18`, batch 128, ms for forward / input gradient / weight gradient):
/// 64 channels at 32×32, implicit GEMM 0.42 / 0.45 / 0.49 against Winograd 0.48 / 0.48 / 1.13
/// (its transforms outweigh the 16 small products); 128 at 16×16, 0.37 / 0.43 / 0.55 against
/// 0.26 / 0.26 / 0.40; 256 at 8×8 and 512 at 4×4, Winograd 1.7–3× faster on every pass.
const AUTO_MIN_CHANNELS: usize = 128;

/// `Auto`'s rule, in this one place: Winograd for an eligible convolution (see
/// [`winograd_eligible`]) with at least [`AUTO_MIN_CHANNELS`] input and output channels, on a
/// hardware adapter. Few channels leave the 16 batched matmuls too little work next to the
/// transforms, and on a software adapter (lavapipe) the implicit GEMM keeps CI's tests on their
/// usual path. Measured with `bench_wgpu --resnet18` (rows `conv ... winograd` next to
/// `conv ... gemm`); see [`AUTO_MIN_CHANNELS`].
pub(super) fn auto_picks_winograd(a: &Conv2dArgs, hardware: bool) -> bool {
    hardware && winograd_eligible(a) && a.geom.channels >= AUTO_MIN_CHANNELS && a.out_channels >= AUTO_MIN_CHANNELS
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
    fn auto_takes_winograd_only_for_wide_eligible_convolutions_on_hardware() {
        let args = |c: usize, o: usize, kernel: usize, stride: usize, pad: usize| Conv2dArgs {
            geom: ConvGeom::square(2, c, (16, 16), kernel, stride, pad, 1).unwrap(),
            out_channels: o,
            groups: 1,
        };
        assert!(auto_picks_winograd(&args(128, 128, 3, 1, 1), true));
        assert!(auto_picks_winograd(&args(512, 256, 3, 1, 2), true));
        assert!(!auto_picks_winograd(&args(128, 128, 3, 1, 1), false), "software adapters keep the GEMM");
        assert!(!auto_picks_winograd(&args(64, 64, 3, 1, 1), true), "ResNet's first stage: the GEMM is faster");
        assert!(!auto_picks_winograd(&args(64, 128, 3, 1, 1), true));
        assert!(!auto_picks_winograd(&args(128, 64, 3, 1, 1), true));
        assert!(!auto_picks_winograd(&args(128, 128, 3, 2, 1), true));
        assert!(!auto_picks_winograd(&args(128, 128, 1, 1, 0), true));
        assert!(!auto_picks_winograd(&args(128, 128, 3, 1, 3), true));
        assert!(!winograd_eligible(&Conv2dArgs { groups: 2, ..args(64, 64, 3, 1, 1) }));
        assert!(winograd_eligible(&args(3, 5, 3, 1, 0)));
    }
}
