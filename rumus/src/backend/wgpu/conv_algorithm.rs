//! Which algorithm the wgpu backend's convolutions run: the implicit GEMM of `conv2d.rs`, or
//! Winograd F(2×2, 3×3) or F(4×4, 3×3) (`winograd.rs`) where the geometry allows it. Chosen per backend
//! ([`WgpuBackend::with_conv_algorithm`](super::WgpuBackend::with_conv_algorithm)), by default
//! from `RUMUS_WGPU_CONV`.

use crate::backend::Conv2dArgs;

/// The variable that sets a new backend's [`ConvAlgorithm`] (`auto`, `gemm`, `winograd` or
/// `winograd4`).
pub(super) const CONV_ENV: &str = "RUMUS_WGPU_CONV";

/// How the wgpu backend computes a convolution's forward, input gradient and weight gradient.
///
/// Every algorithm runs on the GPU; none falls back to the CPU. Winograd applies only to 3×3
/// kernels at stride 1, dilation 1, without groups and with padding of at most 2 (see
/// [`ConvAlgorithm::Winograd`]); every other convolution runs on the implicit GEMM whatever the
/// setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConvAlgorithm {
    /// Winograd F(4×4, 3×3) for eligible convolutions on a hardware adapter where it was
    /// measured faster, per pass: the forward and input gradient from 128 input and output
    /// channels, the weight gradient from 64, with `MatmulPrecision::F16TensorCores` as without
    /// it; the implicit GEMM otherwise (always on software adapters such as lavapipe). The
    /// default.
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
    /// Winograd F(4×4, 3×3) for every eligible convolution, as [`ConvAlgorithm::Winograd`] does
    /// F(2×2, 3×3): a 6×6 input tile per 4×4 output tile and 36 batched matmuls, 2.25
    /// multiplications per output instead of 4, with larger rounding (its transforms' entries
    /// reach 8 and 1/24).
    Winograd4x4,
}

impl ConvAlgorithm {
    /// The setting `RUMUS_WGPU_CONV` names: `auto`, `gemm`, `winograd` (F(2×2, 3×3)) or
    /// `winograd4` (F(4×4, 3×3)), in any case, spaces trimmed; unset or empty: `Auto`. Any
    /// other value is reported on stderr and `Auto` kept.
    pub(super) fn from_env_value(value: Option<&str>) -> ConvAlgorithm {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("auto") => ConvAlgorithm::Auto,
            Some("gemm") => ConvAlgorithm::ImplicitGemm,
            Some("winograd") => ConvAlgorithm::Winograd,
            Some("winograd4") => ConvAlgorithm::Winograd4x4,
            Some(other) => {
                eprintln!("rumus: {CONV_ENV}={other:?} is not one of auto, gemm, winograd, winograd4; using auto");
                ConvAlgorithm::Auto
            }
        }
    }

    /// The setting of the environment, read when a backend is created.
    pub(super) fn from_env() -> ConvAlgorithm {
        ConvAlgorithm::from_env_value(std::env::var(CONV_ENV).ok().as_deref())
    }
}

/// The tiles of a Winograd convolution: F(2×2, 3×3) (`winograd.wgsl`) or F(4×4, 3×3)
/// (`winograd4.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WinogradTile {
    F2x2,
    F4x4,
}

impl WinogradTile {
    /// The side of its output tiles.
    pub(super) fn side(self) -> usize {
        match self {
            WinogradTile::F2x2 => 2,
            WinogradTile::F4x4 => 4,
        }
    }

    /// Its transformed positions per tile (the input tile's side, squared): the batch of products.
    pub(super) fn positions(self) -> usize {
        (self.side() + 2).pow(2)
    }
}

/// Whether Winograd (either tile) computes `a` exactly as the convolution defines it: a 3×3
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

/// Whether a Winograd convolution of `channels` in and `out_channels` out runs its 16 products on
/// tensor cores when the backend's precision is `MatmulPrecision::F16TensorCores`: from 128 of
/// each (the input gradient's swap them); below,
/// on the f32 tiles whatever the precision. The tensor-core tile is 128×256, so 64 rows waste
/// half of it and the weight gradient's 64×64 products seven eighths. On an H100 (run X,
/// 2026-12-07, `bench_wgpu --resnet18`, batch 128, ms for forward / input gradient / weight
/// gradient on f32 products against tensor cores): 64 channels at 32×32 0.402 / 0.403 / 0.369
/// against 0.406 / 0.407 / 0.534; 128 at 16×16 0.219 / 0.219 / 0.264 against 0.180 / 0.181 /
/// 0.230, and 256 and 512 channels 30–43 % faster on tensor cores. So `Auto` picks the same
/// algorithm at either precision.
pub(super) fn winograd_products_on_tensor_cores(channels: usize, out_channels: usize) -> bool {
    channels.min(out_channels) >= MIN_CHANNELS_TENSOR_CORES
}

/// See [`winograd_products_on_tensor_cores`].
const MIN_CHANNELS_TENSOR_CORES: usize = 128;

/// `Auto`'s rule, in this one place: Winograd F(4×4, 3×3) for an eligible convolution (see
/// [`winograd_eligible`]) with at least [`min_channels_f32`] input and output channels for the
/// pass, on a hardware adapter. Few channels leave the batched matmuls too little work next to
/// the transforms, and on a software adapter (lavapipe) the implicit GEMM keeps CI's tests on
/// their usual path. Measured with `bench_wgpu --resnet18` (rows `conv ... winograd` and
/// `winograd4` next to `conv ... gemm`).
pub(super) fn auto_picks_winograd(a: &Conv2dArgs, pass: ConvPass, hardware: bool) -> Option<WinogradTile> {
    let least = min_channels_f32(pass);
    (hardware && winograd_eligible(a) && a.geom.channels >= least && a.out_channels >= least)
        .then_some(WinogradTile::F4x4)
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
        assert_eq!(ConvAlgorithm::from_env_value(Some("winograd4")), ConvAlgorithm::Winograd4x4);
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
                .map(|p| auto_picks_winograd(a, p, true) == Some(WinogradTile::F4x4))
        };
        assert_eq!(f32_picks(&args(128, 128, 3, 1, 1)), [true; 3]);
        assert_eq!(f32_picks(&args(512, 256, 3, 1, 2)), [true; 3]);
        assert!(
            auto_picks_winograd(&args(128, 128, 3, 1, 1), ConvPass::Forward, false).is_none(),
            "software adapters keep the GEMM"
        );
        assert!(auto_picks_winograd(&args(128, 128, 3, 1, 1), ConvPass::WeightGrad, false).is_none());
        assert_eq!(f32_picks(&args(64, 64, 3, 1, 1)), [false, false, true], "ResNet's first stage");
        assert_eq!(f32_picks(&args(32, 64, 3, 1, 1)), [false; 3]);
        assert_eq!(f32_picks(&args(64, 128, 3, 1, 1)), [false, false, true]);
        assert_eq!(f32_picks(&args(128, 64, 3, 1, 1)), [false, false, true]);
        for a in [args(128, 128, 3, 2, 1), args(128, 128, 1, 1, 0), args(128, 128, 3, 1, 3)] {
            assert_eq!(f32_picks(&a), [false; 3]);
        }
        assert!(!winograd_eligible(&Conv2dArgs { groups: 2, ..args(64, 64, 3, 1, 1) }));
        assert!(winograd_eligible(&args(3, 5, 3, 1, 0)));
    }

    #[test]
    fn winograd_products_take_tensor_cores_from_128_channels() {
        assert!(winograd_products_on_tensor_cores(128, 128));
        assert!(winograd_products_on_tensor_cores(512, 256));
        assert!(!winograd_products_on_tensor_cores(64, 64), "ResNet's first stage");
        assert!(!winograd_products_on_tensor_cores(64, 128));
        assert!(!winograd_products_on_tensor_cores(128, 120));
    }
}
