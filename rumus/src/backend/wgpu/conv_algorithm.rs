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
    /// Winograd for eligible convolutions with at least 64 input and output channels on a
    /// hardware adapter, where it was measured faster: F(4×4, 3×3), or F(2×2, 3×3) for a
    /// forward or input gradient on tensor cores (`MatmulPrecision::F16TensorCores`) over few
    /// tiles; the implicit GEMM otherwise (always on software adapters such as lavapipe). The
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

/// The least input and output channels for which `Auto` takes Winograd, on every pass. On an
/// H100 (runs Y and Z, 2026-12-07, `bench_wgpu --resnet18`, batch 128, ms for forward / input
/// gradient / weight gradient) at 64 channels and 32×32 the implicit GEMM took 0.369 / 0.406 /
/// 0.457, F(2×2, 3×3) 0.288 / 0.289 / 0.372 and F(4×4, 3×3) 0.207 / 0.207 / 0.243 (cuDNN 0.289
/// / 0.428 / 0.460), its forward products on 64×64 tiles (`forward_products_plan` in
/// `winograd.rs`; on the 128×256 tiles, half idle, F(4×4, 3×3) took 0.278 alone and inside the
/// step no less than the GEMM). The whole ResNet-18 step went from 14.9–15.0 to 14.3–14.5 ms
/// (run Z). From 128 channels both Winograd tiles run 1.5–3× faster than the GEMM.
const MIN_CHANNELS: usize = 64;

/// With tensor cores running the products, the forward and input gradient take F(2×2, 3×3)
/// where F(4×4, 3×3) would have fewer tiles than this: the products' columns are the tiles, and
/// the tensor-core tile is 256 columns wide. Run Y (ms, forward, F(2×2) against F(4×4) on tensor
/// cores): 128 channels at 16×16 (2048 tiles of 4×4) 0.179 against 0.143; 256 at 8×8 (512)
/// 0.115 against 0.118; 512 at 4×4 (128) 0.095 against 0.153. In f32, and for the weight
/// gradient (whose products run over the tiles), F(4×4, 3×3) was as fast or faster everywhere.
const MIN_TILES_F4_TENSOR_CORES: usize = 512;

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

/// `Auto`'s rule, in this one place: on a hardware adapter, Winograd for an eligible
/// convolution (see [`winograd_eligible`]) with at least [`MIN_CHANNELS`] input and output
/// channels: F(4×4, 3×3), except for a forward or input gradient whose products run on tensor
/// cores (`tensor_cores`, and [`winograd_products_on_tensor_cores`]) over fewer than
/// [`MIN_TILES_F4_TENSOR_CORES`] tiles of 4×4, which takes F(2×2, 3×3). Few channels leave the
/// batched matmuls too little work next to the transforms, and on a software adapter (lavapipe)
/// the implicit GEMM keeps CI's tests on their usual path. Measured with `bench_wgpu --resnet18`
/// (rows `conv ... gemm`, `winograd`, `winograd4`, each also `tc`).
pub(super) fn auto_picks_winograd(
    a: &Conv2dArgs,
    pass: ConvPass,
    hardware: bool,
    tensor_cores: bool,
) -> Option<WinogradTile> {
    let g = &a.geom;
    if !(hardware && winograd_eligible(a) && g.channels >= MIN_CHANNELS && a.out_channels >= MIN_CHANNELS) {
        return None;
    }
    // The input gradient's output is the input.
    let (h, w) = if pass == ConvPass::InputGrad { (g.in_h, g.in_w) } else { (g.out_h, g.out_w) };
    let tiles_f4 = g.batch.saturating_mul(h.div_ceil(4)).saturating_mul(w.div_ceil(4));
    let few_tiles = pass != ConvPass::WeightGrad && tiles_f4 < MIN_TILES_F4_TENSOR_CORES;
    if tensor_cores && winograd_products_on_tensor_cores(g.channels, a.out_channels) && few_tiles {
        Some(WinogradTile::F2x2)
    } else {
        Some(WinogradTile::F4x4)
    }
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
    fn auto_takes_winograd_for_wide_eligible_convolutions_on_hardware() {
        use WinogradTile::{F2x2, F4x4};
        let shaped =
            |batch: usize, size: usize, c: usize, o: usize, kernel: usize, stride: usize, pad: usize| Conv2dArgs {
                geom: ConvGeom::square(batch, c, (size, size), kernel, stride, pad, 1).unwrap(),
                out_channels: o,
                groups: 1,
            };
        let args = |c, o, kernel, stride, pad| shaped(2, 16, c, o, kernel, stride, pad);
        let picks = |a: &Conv2dArgs, tensor_cores: bool| {
            [ConvPass::Forward, ConvPass::InputGrad, ConvPass::WeightGrad]
                .map(|p| auto_picks_winograd(a, p, true, tensor_cores))
        };
        let f4 = [Some(F4x4); 3];
        assert_eq!(picks(&args(128, 128, 3, 1, 1), false), f4);
        assert_eq!(picks(&args(512, 256, 3, 1, 2), false), f4);
        assert_eq!(picks(&args(64, 64, 3, 1, 1), false), f4, "ResNet's first stage");
        assert_eq!(picks(&args(64, 128, 3, 1, 1), false), f4);
        assert_eq!(picks(&args(128, 64, 3, 1, 1), true), f4, "products of 64 channels stay f32: F(4×4)");
        assert_eq!(picks(&args(32, 64, 3, 1, 1), false), [None; 3]);
        assert_eq!(picks(&args(64, 48, 3, 1, 1), true), [None; 3]);
        for tensor_cores in [false, true] {
            for pass in [ConvPass::Forward, ConvPass::WeightGrad] {
                let a = args(128, 128, 3, 1, 1);
                assert_eq!(auto_picks_winograd(&a, pass, false, tensor_cores), None, "software adapters keep the GEMM");
            }
            for a in [args(128, 128, 3, 2, 1), args(128, 128, 1, 1, 0), args(128, 128, 3, 1, 3)] {
                assert_eq!(picks(&a, tensor_cores), [None; 3]);
            }
        }
        // ResNet-18 at batch 128 on tensor cores: F(4×4) at 16×16 (2048 tiles) and 8×8 (512); at
        // 4×4 (128 tiles) the forward and input gradient take F(2×2); at 64 channels the
        // products stay f32, so F(4×4).
        assert_eq!(picks(&shaped(128, 16, 128, 128, 3, 1, 1), true), f4);
        assert_eq!(picks(&shaped(128, 8, 256, 256, 3, 1, 1), true), f4);
        assert_eq!(picks(&shaped(128, 4, 512, 512, 3, 1, 1), true), [Some(F2x2), Some(F2x2), Some(F4x4)]);
        assert_eq!(picks(&shaped(128, 4, 512, 512, 3, 1, 1), false), f4);
        assert_eq!(picks(&shaped(128, 4, 64, 64, 3, 1, 1), true), f4);
        // The input gradient counts the tiles of the input: 7×7 outputs (256 tiles at batch 64) of
        // 9×9 inputs (576) at pad 0.
        let valid = shaped(64, 9, 128, 128, 3, 1, 0);
        assert_eq!(picks(&valid, true), [Some(F2x2), Some(F4x4), Some(F4x4)]);
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
