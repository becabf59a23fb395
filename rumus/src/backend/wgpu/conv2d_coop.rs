//! A convolution's implicit GEMMs on tensor cores (`conv2d_coop.wgsl`, on the 128×256 tiles of
//! `lib/coop_tiles.wgsl`): the forward and the weight gradient that run instead of
//! `conv2d.wgsl`'s f32 GEMMs when the backend's matmul precision is
//! `MatmulPrecision::F16TensorCores`, for convolutions of one group that Winograd does not take
//! (strides, 1×1 and other kernel sizes, few channels). Operands are rounded to f16 and products
//! summed in f32, as in the tensor-core matmul.
//!
//! A product with few output tiles (the weight gradient's over n·oh·ow, a forward's with few
//! pixels) splits its K into pieces whose partial sums the backend's reduction adds up; a
//! forward's sums start from the bias (unsplit, then). The input gradient stays on
//! `conv2d.wgsl`'s f32 kernel: on tensor cores it went through im2col's columns and `col2im`,
//! whose memory traffic cost what the tensor cores saved (on an H100, ResNet-18's six stride-2
//! input gradients took 1.02 ms that way against 1.03 ms in f32; docs/BENCHMARKS.md).

use std::sync::atomic::Ordering;

use super::conv2d::{params, Dims, INDEX_LIMIT, SIGNATURE};
use super::coop_tiles;
use super::encoder::Binding;
use super::launch::bind;
use super::pipelines;
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{Conv2dArgs, DType, ReduceDims, ReduceOp, Storage};
use crate::Result;

const OP: &str = "conv2d";
/// The tiles' K slice (`BK` in `lib/coop_tiles.wgsl`).
const SLICE: usize = 32;
const TILE: [usize; 2] = coop_tiles::TILE;
/// A product with few output tiles (the weight gradient's, a forward's with few pixels) splits
/// its K until about this many workgroups share it: one per SM of an H100, where twice as many
/// (shorter splits, more partial sums to add) measured slower (docs/BENCHMARKS.md run AC)...
const SPLIT_TARGET_GROUPS: usize = 132;
/// ...in pieces no shorter than this (a multiple of the K slice, which a piece must be).
const MIN_SPLIT_LEN: usize = 256;
/// The entry point of each product's module.
pub(super) const ENTRY: &str = "conv2d_coop";
/// The modules of the forward and the weight gradient, for the start-up compile of
/// `set_matmul_precision`.
pub(super) const SHADERS: [&pipelines::Shader; 2] =
    [&pipelines::CONV2D_COOP_FORWARD, &pipelines::CONV2D_COOP_WEIGHT_GRAD];

/// What opens each module of `conv2d_coop.wgsl`: the tiles' prelude with the sides the product
/// fetches its operands along (the left along k; the right along its columns in the forward,
/// along k in the weight gradient), then the product (0: forward, 1: weight gradient).
pub(super) fn constants<const PRODUCT: u32>() -> String {
    format!("{}\nconst PRODUCT: u32 = {PRODUCT}u;", coop_tiles::prelude(true, PRODUCT == 0))
}

/// One product of `conv2d_coop.wgsl`: which, its extents and operands.
struct Product<'a> {
    shader: &'static pipelines::Shader,
    /// M, N and K.
    rows: usize,
    cols: usize,
    k: usize,
    /// The bound operands (x, weight, grad, bias), before the output.
    inputs: [Binding<'a>; 4],
    /// Whether a bias seeds the sums; such a product is not split (every split would start
    /// from the bias).
    has_bias: bool,
}

/// The length of the splits of a product's K (a multiple of the K slice) for `tiles` output
/// tiles: as many splits as bring the workgroups near [`SPLIT_TARGET_GROUPS`], each at least
/// [`MIN_SPLIT_LEN`] long, with all their partial outputs of `output` elements within the
/// kernels' indexing.
fn split_len(tiles: usize, k: usize, output: usize) -> usize {
    let most = (INDEX_LIMIT as usize / output.max(1)).max(1);
    let wanted = SPLIT_TARGET_GROUPS.div_ceil(tiles.max(1)).clamp(1, k.div_ceil(MIN_SPLIT_LEN).min(most));
    k.div_ceil(wanted).next_multiple_of(SLICE).max(SLICE)
}

impl WgpuBackend {
    /// Whether `a`'s GEMMs run on tensor cores: the precision asks for them, one group, and
    /// none of the products is empty (those stay on the f32 GEMM, which writes their zeros).
    pub(super) fn conv_on_tensor_cores(&self, a: &Conv2dArgs, d: &Dims) -> bool {
        self.tensor_core_matmul.load(Ordering::Relaxed)
            && a.groups == 1
            && d.weight_cols > 0
            && a.out_channels > 0
            && d.out_pixels > 0
    }

    /// Runs `product` over its splits of K and adds their partial outputs up.
    fn coop_product(&self, product: Product<'_>, a: &Conv2dArgs) -> Result<Storage> {
        let output = product.rows * product.cols;
        let [tiles_m, tiles_n] = [product.rows.div_ceil(TILE[0]), product.cols.div_ceil(TILE[1])];
        let split_len = match product.has_bias {
            false => split_len(tiles_m * tiles_n, product.k, output),
            true => product.k.next_multiple_of(SLICE),
        };
        let splits = product.k.div_ceil(split_len);
        let out = self.alloc(splits * output, DType::F32, OP)?;
        let [x, w, g, b] = product.inputs;
        let buffers = [x, w, g, b, bind(&out)];
        let params = params(a, 0, product.has_bias, split_len);
        // Workgroups for [columns, rows, splits] of tiles, each side at most the adapter's
        // dispatch limit (the kernel walks the rest with grid strides).
        let groups = [tiles_n, tiles_m, splits].map(|t| t.clamp(1, self.max_groups) as u32);
        self.run(product.shader, ENTRY, &SIGNATURE, &params, &buffers, groups)?;
        let out = self.output(out);
        if splits == 1 {
            return Ok(out);
        }
        self.reduce_kernel(ReduceOp::Sum, &out, ReduceDims { outer: 1, len: splits, inner: output })
    }

    pub(super) fn conv2d_coop_forward(
        &self,
        x: &WgpuStorage,
        w: &WgpuStorage,
        bias: Option<&WgpuStorage>,
        a: &Conv2dArgs,
        d: &Dims,
    ) -> Result<Storage> {
        let inputs = [bind(x), bind(w), self.unused(), bias.map_or(self.unused(), bind)];
        let (rows, cols, k) = (a.out_channels, d.out_pixels, d.weight_cols);
        let product = Product { shader: SHADERS[0], rows, cols, k, inputs, has_bias: bias.is_some() };
        self.coop_product(product, a)
    }

    pub(super) fn conv2d_coop_weight_grad(
        &self,
        x: &WgpuStorage,
        grad: &WgpuStorage,
        a: &Conv2dArgs,
        d: &Dims,
    ) -> Result<Storage> {
        let inputs = [bind(x), self.unused(), bind(grad), self.unused()];
        let (rows, cols, k) = (a.out_channels, d.weight_cols, d.out_pixels);
        let product = Product { shader: SHADERS[1], rows, cols, k, inputs, has_bias: false };
        self.coop_product(product, a)
    }
}

#[cfg(test)]
mod tests {
    use super::{split_len, INDEX_LIMIT, MIN_SPLIT_LEN, SLICE, SPLIT_TARGET_GROUPS};

    /// Splits are whole K slices (the kernel's slices never cross a split), at least
    /// `MIN_SPLIT_LEN` long unless K is shorter, cover K, bring the workgroups near the target
    /// without passing it by more than a split's worth, and keep the partials indexable.
    #[test]
    fn splits_are_whole_slices_that_fill_the_gpu() {
        for (tiles, k, output) in [
            (3, 32768, 73_728),    // ResNet stage 2's stride-2 weight gradient: 128 × 576 over n·S
            (36, 2048, 1_179_648), // stage 4's: 512 × 2304 over 2048 pixels
            (32, 2304, 1_048_576), // stage 4's stride-2 forward: 32 tiles over K = 2304
            (512, 576, 8_388_608), // a forward with enough tiles: one split
            (1, 27, 64),           // K shorter than a slice
            (1, 1 << 20, 1 << 29), // partials at the index limit
        ] {
            let len = split_len(tiles, k, output);
            let splits = k.div_ceil(len);
            assert_eq!(len % SLICE, 0, "{tiles} tiles, K {k}: {len}");
            assert!(len >= MIN_SPLIT_LEN.min(k.next_multiple_of(SLICE)), "{tiles} tiles, K {k}: {len}");
            assert!(splits * len >= k);
            assert!(tiles * (splits - 1) < SPLIT_TARGET_GROUPS, "{tiles} tiles, K {k}: {splits} splits");
            assert!(
                (splits * output) as u64 <= INDEX_LIMIT.max(output as u64),
                "{tiles} tiles, K {k}: {splits} splits"
            );
        }
        assert_eq!(split_len(512, 576, 8_388_608), 576, "enough tiles: K whole");
        assert_eq!(32768usize.div_ceil(split_len(3, 32768, 73_728)), 43, "3 tiles: 43 splits of 768");
    }
}
