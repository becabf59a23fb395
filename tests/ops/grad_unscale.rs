//! Loss scaling's fused unscale-and-check (`rumus::testing::unscale_grad`, the op behind
//! `LossScaler`; PyTorch's equivalent is its internal
//! `torch._amp_foreach_non_finite_check_and_unscale_`): over random lengths and random NaN and
//! infinite values at random positions, the flag is raised exactly when some value is not
//! finite and the output is `g · inv_scale`, on the CPU and on wgpu. The op is outside autograd
//! (no gradient check); CPU ↔ wgpu parity at the edges (views, laps of the grid stride, a flag
//! accumulating over gradients) is `unscale_grad_matches_and_flags_non_finite_values` in
//! `wgpu_parity.rs`, bad input `unscale_grad_refuses_bad_flags_and_scales` in
//! `tests/hardening/tensors.rs`.

use proptest::prelude::*;
use rumus::rng::Rng;

use crate::wgpu_parity::within_ulps;
use rumus::testing::{non_finite_flag, unscale_grad, wgpu_or_skip};
use rumus::{Device, RawTensor, Result};

/// `len` values in [-1000, 1000] from `seed`, with `bad`'s (position, kind) replaced by NaN,
/// +inf or -inf (kind 0, 1, 2; positions taken modulo `len`).
fn gradient(len: usize, seed: u64, bad: &[(usize, u8)]) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut values: Vec<f32> = (0..len).map(|_| (rng.uniform() * 2.0 - 1.0) * 1000.0).collect();
    for &(at, kind) in bad {
        values[at % len] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][kind as usize % 3];
    }
    values
}

/// The op on `device` against `g · inv_scale` (bit for bit on the CPU, within one ulp on wgpu)
/// and a flag raised exactly when some value is not finite; then a finite gradient through the
/// same flag leaves it as it was.
fn check(device: &Device, values: &[f32], inv_scale: f32, exact: bool) -> Result<()> {
    let flag = non_finite_flag(device)?;
    let g = RawTensor::from_slice(values, &[values.len()], device)?;
    let got = unscale_grad(&g, inv_scale, &flag)?.to_vec()?;
    let want: Vec<f32> = values.iter().map(|x| x * inv_scale).collect();
    let what = format!("{device:?}: {} values · {inv_scale}", values.len());
    within_ulps(&what, &got, &want, if exact { 0 } else { 1 });
    let non_finite = values.iter().any(|x| !x.is_finite());
    let raised = flag.to_vec_u32()?[0] != 0;
    assert_eq!(raised, non_finite, "{device:?}: flag for {} values", values.len());
    unscale_grad(&RawTensor::ones(&[3], device)?, inv_scale, &flag)?;
    assert_eq!(flag.to_vec_u32()?[0] != 0, non_finite, "{device:?}: the flag after a finite gradient");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random lengths from 1 to 5000, up to three non-finite values (NaN, +inf, -inf) at random
    /// positions or none, and scales from 2^-20 to 2^3 or arbitrary ones.
    #[test]
    fn unscale_grad_flags_exactly_the_non_finite_gradients(
        len in 1usize..5000,
        seed in any::<u64>(),
        bad in prop_oneof![Just(Vec::new()), proptest::collection::vec((any::<usize>(), 0u8..3), 1..4)],
        inv_scale in prop_oneof![(-20i32..4).prop_map(|k| 2f32.powi(k)), 1e-5f32..10.0],
    ) {
        let values = gradient(len, seed, &bad);
        check(&Device::cpu(), &values, inv_scale, true).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Some(gpu) = wgpu_or_skip() {
            check(&gpu, &values, inv_scale, false).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
