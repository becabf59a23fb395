//! The tensor-core tiles (`lib/coop_tiles.wgsl`) that `matmul_coop.wgsl` and
//! `conv2d_coop.wgsl` run on: their size, the workgroup memory they need, and what opens each
//! module that includes them (the directives for cooperative matrices and f16, and the sides
//! along which the module fetches its operands).

use super::pipelines::{self, Shader};

/// The output tile, rows × columns.
pub(super) const TILE: [usize; 2] = [128, 256];

/// Workgroup memory of the tiles: each operand's slice of halves (the larger of its two shapes:
/// 128×40 and 32×136 of lhs, 256×40 and 32×264 of rhs), plus 8 subgroups' 16×16 f32 edge blocks.
const SHARED_BYTES: u32 = (128 * 40 + 256 * 40) * 2 + 8 * 256 * 4;

/// `Ok` when an adapter with `limits` has the tiles' workgroup memory; else why not.
/// `set_matmul_precision` refuses tensor cores on such an adapter (they also need the
/// cooperative-matrix feature, which WebGPU's defaults lack).
pub(super) fn fits(limits: &::wgpu::Limits) -> std::result::Result<(), String> {
    if limits.max_compute_workgroup_storage_size < SHARED_BYTES {
        return Err(format!(
            "{} bytes of workgroup memory; the tensor-core kernels need {SHARED_BYTES}",
            limits.max_compute_workgroup_storage_size
        ));
    }
    Ok(())
}

/// What opens a module on the tiles: the directives (before every included file), and the sides
/// its operands are fetched along (`LHS_K_FAST`, `RHS_N_FAST`: constants, so the fragment loads
/// that depend on them stay in uniform control flow).
pub(super) fn prelude(lhs_k_fast: bool, rhs_n_fast: bool) -> String {
    format!(
        "enable f16;\nenable wgpu_cooperative_matrix;\nconst LHS_K_FAST: bool = {lhs_k_fast};\n\
         const RHS_N_FAST: bool = {rhs_n_fast};"
    )
}

/// [`prelude`] as the constants of a `Shader`.
pub(super) fn oriented<const LHS_K_FAST: bool, const RHS_N_FAST: bool>() -> String {
    prelude(LHS_K_FAST, RHS_N_FAST)
}

/// The module of `matmul_coop.wgsl` for operands contiguous along k (lhs) and along the
/// columns (rhs), or along the other side (the dispatcher reads them as vec4s along whichever
/// side is contiguous).
pub(super) fn matmul_shader(lhs_k_fast: bool, rhs_n_fast: bool) -> &'static Shader {
    &pipelines::MATMUL_COOP[usize::from(!lhs_k_fast) * 2 + usize::from(!rhs_n_fast)]
}

#[cfg(test)]
mod tests {
    use super::super::matmul::tests::shader_const;
    use super::{matmul_shader, SHARED_BYTES, TILE};

    /// The constants follow the shader library's tile and K slice (rows padded by 8 halves).
    #[test]
    fn constants_match_the_shader() {
        let source = include_str!("../../../shaders/lib/coop_tiles.wgsl");
        let (m, n, bk) = (shader_const(source, "LTILE_M"), shader_const(source, "LTILE_N"), shader_const(source, "BK"));
        let slice = |tile: u32| (tile * (bk + 8)).max(bk * (tile + 8));
        assert_eq!((slice(m) + slice(n)) * 2 + 8 * 256 * 4, SHARED_BYTES);
        assert_eq!([m as usize, n as usize], TILE);
        assert_eq!(shader_const(source, "LOADS_A"), m * bk / 1024);
        assert_eq!(shader_const(source, "LOADS_B"), n * bk / 1024);
    }

    /// Each orientation has its module, whose prelude says that orientation.
    #[test]
    fn every_orientation_has_its_matmul_module() {
        for lhs in [true, false] {
            for rhs in [true, false] {
                let constants = (matmul_shader(lhs, rhs).constants.expect("a prelude"))();
                assert!(constants.contains(&format!("LHS_K_FAST: bool = {lhs};")), "{constants}");
                assert!(constants.contains(&format!("RHS_N_FAST: bool = {rhs};")), "{constants}");
            }
        }
    }
}
