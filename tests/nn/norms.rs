//! The normalisation layers of issue #30: GroupNorm, InstanceNorm2d and RmsNorm. The ops against
//! finite differences and against references composed from elementwise ops and reductions, the
//! layers on the CPU against wgpu on strided inputs (BatchNorm1d and BatchNorm2d too, whose op is
//! tested in tests/ops/batch_norm_fused.rs), PyTorch's names and layouts, and bad input as
//! errors (property-based for group counts). PyTorch's numbers are in `norms_fixture.rs`.

use crate::common::layer_parity::{assert_layer_parity, Build};
use proptest::prelude::*;
use rumus::nn::{BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm2d, Module, RmsNorm, RMS_NORM_EPS};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, Result};

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &Device::cpu()).expect("randn")
}

/// `x / √(mean(x²) + eps) · weight` over the trailing `k` axes, from ops (autograd's backward).
fn rms_reference(x: &RawTensor, k: usize, weight: Option<&RawTensor>, eps: f32) -> Result<RawTensor> {
    let axes: Vec<isize> = (-(k as isize)..0).collect();
    let y = x.div(&x.mul(x)?.mean(&axes, true)?.add_scalar(eps)?.sqrt()?)?;
    match weight {
        Some(w) => y.mul(w),
        None => Ok(y),
    }
}

/// Group normalisation of `[n, c, ...]` from ops: mean and biased variance per sample and group.
fn group_reference(x: &RawTensor, groups: usize, w: Option<&RawTensor>, b: Option<&RawTensor>) -> Result<RawTensor> {
    let shape = x.shape().to_vec();
    let rest: usize = shape[1..].iter().product();
    let g = x.reshape(&[shape[0], groups, rest / groups])?;
    let mean = g.mean(&[2], true)?;
    let centered = g.sub(&mean)?;
    let var = centered.mul(&centered)?.mean(&[2], true)?;
    let y = centered.div(&var.add_scalar(1e-5)?.sqrt()?)?.reshape(&shape)?;
    let mut channel = vec![1; shape.len() - 1];
    channel[0] = shape[1];
    let y = match w {
        Some(w) => y.mul(&w.reshape(&channel)?)?,
        None => y,
    };
    match b {
        Some(b) => y.add(&b.reshape(&channel)?),
        None => Ok(y),
    }
}

fn check_gradients(device: &Device) -> Result<()> {
    let on = |t: RawTensor| t.to_device(device).expect("to_device");
    let gc = GradCheck::default();
    // GroupNorm over images and sequences, with and without the affine map.
    let (x, w, b) = (on(randn(&[2, 4, 3, 2], 1)), on(randn(&[4], 2)), on(randn(&[4], 3)));
    grad_check(&[x.clone(), w, b], gc, |i| i[0].group_norm(2, Some(&i[1]), Some(&i[2]), 1e-5))?;
    let seq = on(randn(&[2, 6, 5], 4));
    grad_check(std::slice::from_ref(&seq), gc, |i| i[0].group_norm(3, None, None, 1e-5))?;
    // Instance norm: one channel per group.
    grad_check(std::slice::from_ref(&x), gc, |i| i[0].group_norm(4, None, None, 1e-5))?;
    // RMSNorm over the last axis with a weight, and over two axes without.
    let (r, rw) = (on(randn(&[3, 8], 5)), on(randn(&[8], 6)));
    grad_check(&[r, rw], gc, |i| i[0].rms_norm(&[8], Some(&i[1]), 1e-6))?;
    let r2 = on(randn(&[2, 3, 4], 7));
    grad_check(std::slice::from_ref(&r2), gc, |i| i[0].rms_norm(&[3, 4], None, 1e-6))?;
    Ok(())
}

#[test]
fn gradients_match_finite_differences_on_the_cpu() -> Result<()> {
    check_gradients(&Device::cpu())
}

#[test]
fn gradients_match_finite_differences_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_gradients(&gpu)
}

/// Values and every gradient of `f` and of `reference` on the same leaves.
fn agree(
    what: &str,
    leaves: &[RawTensor],
    f: impl Fn(&[RawTensor]) -> Result<RawTensor>,
    reference: impl Fn(&[RawTensor]) -> Result<RawTensor>,
) -> Result<()> {
    let leaves = leaves.iter().map(|t| t.requires_grad_()).collect::<Result<Vec<_>>>()?;
    let (y, want) = (f(&leaves)?, reference(&leaves)?);
    assert_close(&format!("{what}: values"), &y.to_vec()?, &want.to_vec()?, 1e-5);
    let weights = RawTensor::rand_uniform(y.shape(), -1.0, 1.0, 9, &Device::cpu())?.to_device(y.device())?;
    let (g, gw) = (y.mul(&weights)?.sum_all()?.backward()?, want.mul(&weights)?.sum_all()?.backward()?);
    for (k, leaf) in leaves.iter().enumerate() {
        let (got, want) = (g.get(leaf).expect("gradient").to_vec()?, gw.get(leaf).expect("gradient").to_vec()?);
        assert_close(&format!("{what}: gradient of input {k}"), &got, &want, 1e-4);
    }
    Ok(())
}

/// The fused RMS kernels (rows longer than a workgroup, too) and the group norm's composition
/// against the references.
fn check_references(device: &Device) -> Result<()> {
    let on = |t: RawTensor| t.to_device(device).expect("to_device");
    for (rows, cols) in [(5, 300), (7, 3), (1, 1)] {
        let (x, w) = (on(randn(&[rows, cols], 10)), on(randn(&[cols], 11)));
        agree(
            &format!("rms_norm [{rows}, {cols}] on {device}"),
            &[x, w],
            |i| i[0].rms_norm(&[cols], Some(&i[1]), 1e-6),
            |i| rms_reference(&i[0], 1, Some(&i[1]), 1e-6),
        )?;
    }
    let (x, w, b) = (on(randn(&[3, 6, 4, 5], 12)), on(randn(&[6], 13)), on(randn(&[6], 14)));
    for groups in [1, 2, 3, 6] {
        agree(
            &format!("group_norm({groups}) on {device}"),
            &[x.clone(), w.clone(), b.clone()],
            |i| i[0].group_norm(groups, Some(&i[1]), Some(&i[2]), 1e-5),
            |i| group_reference(&i[0], groups, Some(&i[1]), Some(&i[2])),
        )?;
    }
    Ok(())
}

#[test]
fn fused_kernels_and_compositions_match_their_references_on_the_cpu() -> Result<()> {
    check_references(&Device::cpu())
}

#[test]
fn fused_kernels_and_compositions_match_their_references_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_references(&gpu)
}

/// The layers on both devices from the same (random) weights, on non-contiguous inputs.
#[test]
fn layers_agree_between_cpu_and_wgpu_on_views() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    let layers: Vec<(&str, Vec<usize>, Build)> = vec![
        ("GroupNorm image", vec![2, 6, 4, 5], Box::new(|d| Ok(Box::new(GroupNorm::new(d, 3, 6, 1e-5, true)?)))),
        ("GroupNorm sequence", vec![3, 4, 7], Box::new(|d| Ok(Box::new(GroupNorm::new(d, 2, 4, 1e-5, true)?)))),
        ("InstanceNorm2d", vec![2, 3, 5, 4], Box::new(|d| Ok(Box::new(InstanceNorm2d::new(d, 3, 1e-5, true)?)))),
        ("RmsNorm", vec![2, 5, 6], Box::new(|d| Ok(Box::new(RmsNorm::new(d, &[6], RMS_NORM_EPS, true)?)))),
        ("RmsNorm 2-d", vec![2, 5, 6], Box::new(|d| Ok(Box::new(RmsNorm::new(d, &[5, 6], 1e-5, true)?)))),
        ("BatchNorm2d", vec![3, 6, 4, 8], Box::new(|d| Ok(Box::new(BatchNorm2d::new(d, 6, 1e-5, 0.1)?)))),
        ("BatchNorm2d odd", vec![2, 5, 3, 5], Box::new(|d| Ok(Box::new(BatchNorm2d::new(d, 5, 1e-5, 0.1)?)))),
        ("BatchNorm1d", vec![3, 4, 7], Box::new(|d| Ok(Box::new(BatchNorm1d::new(d, 4, 1e-5, 0.1)?)))),
    ];
    for (name, shape, build) in layers {
        let mut stored = shape.clone();
        let r = stored.len();
        stored.swap(r - 1, r - 2);
        let data = randn(&stored, 20);
        let param_grads = assert_layer_parity(name, &data, &build, Some(30), (&cpu, &gpu))?;
        assert!(!param_grads.is_empty(), "{name} has parameters");
    }
    Ok(())
}

fn names(layer: &dyn Module) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    layer.visit_params("norm", &mut |n, p| out.push((n.to_string(), p.tensor().shape().to_vec())));
    out
}

#[test]
fn layers_use_pytorchs_names_layouts_and_defaults() -> Result<()> {
    let cpu = Device::cpu();
    let pair = |c: usize| vec![("norm.weight".to_string(), vec![c]), ("norm.bias".to_string(), vec![c])];
    let gn = GroupNorm::new(&cpu, 4, 8, 1e-5, true)?;
    assert_eq!(names(&gn), pair(8));
    assert_eq!((gn.groups(), gn.describe()), (4, "GroupNorm(4, 8)".to_string()));
    // torch.nn.GroupNorm(4, 8): weight ones, bias zeros.
    assert_eq!(gn.weight.as_ref().expect("weight").tensor().to_vec()?, vec![1.0; 8]);
    assert_eq!(gn.bias.as_ref().expect("bias").tensor().to_vec()?, vec![0.0; 8]);
    assert!(names(&GroupNorm::new(&cpu, 4, 8, 1e-5, false)?).is_empty());
    // torch.nn.InstanceNorm2d(3) has no parameters (affine=False); affine=True has weight and bias.
    assert!(names(&InstanceNorm2d::new(&cpu, 3, 1e-5, false)?).is_empty());
    assert_eq!(names(&InstanceNorm2d::new(&cpu, 3, 1e-5, true)?), pair(3));
    let rms = RmsNorm::new(&cpu, &[4, 6], RMS_NORM_EPS, true)?;
    assert_eq!(names(&rms), [("norm.weight".to_string(), vec![4, 6])]);
    assert_eq!(rms.normalized_shape(), [4, 6]);
    assert!(names(&RmsNorm::new(&cpu, &[6], RMS_NORM_EPS, false)?).is_empty());
    // A constant sample: the group's variance is 0, so the output is 0 (not NaN) with eps > 0.
    let y = gn.forward_raw(&RawTensor::ones(&[1, 8, 2, 2], &cpu)?)?;
    assert!(y.to_vec()?.iter().all(|v| *v == 0.0));
    Ok(())
}

#[test]
fn bad_input_is_an_error() -> Result<()> {
    let cpu = Device::cpu();
    let x = randn(&[2, 6, 3, 3], 1);
    let invalid = |r: Result<RawTensor>| matches!(r, Err(Error::InvalidArgument { .. }));
    let shape = |r: Result<RawTensor>| matches!(r, Err(Error::Shape { .. }));
    assert!(invalid(x.group_norm(4, None, None, 1e-5)), "4 groups of 6 channels");
    assert!(invalid(x.group_norm(0, None, None, 1e-5)), "0 groups");
    assert!(invalid(x.group_norm(3, None, None, -1.0)), "negative eps");
    assert!(invalid(x.group_norm(3, None, None, f32::NAN)), "NaN eps");
    assert!(shape(randn(&[6], 2).group_norm(3, None, None, 1e-5)), "rank 1");
    assert!(shape(x.group_norm(3, Some(&randn(&[3], 3)), None, 1e-5)), "weight of the wrong size");
    assert!(shape(x.group_norm(3, None, Some(&randn(&[6, 1], 3)), 1e-5)), "bias of the wrong rank");
    assert!(shape(RawTensor::zeros(&[2, 6, 0], &cpu)?.group_norm(3, None, None, 1e-5)), "empty groups");
    assert!(shape(x.rms_norm(&[4], None, 1e-6)), "trailing axes differ");
    assert!(shape(x.rms_norm(&[], None, 1e-6)), "empty normalized shape");
    assert!(shape(x.rms_norm(&[3], Some(&randn(&[4], 4)), 1e-6)), "weight of the wrong size");
    assert!(invalid(x.rms_norm(&[3], None, -1e-3)), "negative eps");
    let ints = RawTensor::from_indices(&[1, 2, 3, 4], &[1, 4], &cpu)?;
    assert!(matches!(ints.rms_norm(&[4], None, 1e-6), Err(Error::DType { .. })));
    // Layers: arguments checked when built, shapes when run.
    assert!(GroupNorm::new(&cpu, 4, 6, 1e-5, true).is_err());
    assert!(GroupNorm::new(&cpu, 0, 6, 1e-5, true).is_err());
    assert!(InstanceNorm2d::new(&cpu, 0, 1e-5, false).is_err());
    assert!(RmsNorm::new(&cpu, &[], 1e-6, true).is_err());
    assert!(RmsNorm::new(&cpu, &[4, 0], 1e-6, true).is_err());
    assert!(RmsNorm::new(&cpu, &[4], f32::NAN, true).is_err());
    let gn = GroupNorm::new(&cpu, 3, 6, 1e-5, true)?;
    assert!(shape(gn.forward_raw(&randn(&[2, 4, 3], 5))), "GroupNorm on 4 channels");
    let inorm = InstanceNorm2d::new(&cpu, 6, 1e-5, false)?;
    assert!(shape(inorm.forward_raw(&randn(&[2, 6, 9], 5))), "InstanceNorm2d on a sequence");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any group count on any channel count: the output when the groups divide the channels,
    /// an `InvalidArgument` otherwise, never a panic; the same for the layer's constructor.
    #[test]
    fn group_counts_are_checked(groups in 0usize..10, channels in 1usize..10, spatial in 1usize..4) {
        let cpu = Device::cpu();
        let x = RawTensor::ones(&[2, channels, spatial], &cpu).unwrap();
        let divides = groups > 0 && channels % groups == 0;
        match x.group_norm(groups, None, None, 1e-5) {
            Ok(y) => {
                prop_assert!(divides);
                prop_assert_eq!(y.shape(), x.shape());
            }
            Err(e) => {
                prop_assert!(!divides);
                prop_assert!(matches!(e, Error::InvalidArgument { op: "group_norm", .. }), "{}", e);
            }
        }
        prop_assert_eq!(GroupNorm::new(&cpu, groups, channels, 1e-5, true).is_ok(), divides);
    }
}
