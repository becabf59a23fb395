//! The convolution family of issue #30: ConvTranspose2d, Conv1d, Upsample (nearest, bilinear),
//! global pooling and 1-D pooling. Each op against PyTorch (values and gradients, float64
//! reference from tests/fixtures/make_conv_fixture.py) on the CPU and on wgpu, against finite
//! differences, CPU against wgpu on non-contiguous inputs, and bad input as errors.

use crate::common::layer_parity::{assert_layer_parity, Build};
use crate::common::torch_fixture::TorchFixture;
use rumus::nn::{
    AvgPool1d, Conv1d, Conv1dConfig, ConvTranspose2d, ConvTranspose2dConfig, GlobalAvgPool, GlobalMaxPool, MaxPool1d,
    Module, Upsample,
};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Conv1dPadding, ConvTranspose2dArgs, Device, Error, RawTensor, Result, UpsampleMode};

type Op = fn(&RawTensor, Option<&RawTensor>, Option<&RawTensor>) -> Result<RawTensor>;

fn ct_stride2(x: &RawTensor, w: Option<&RawTensor>, b: Option<&RawTensor>) -> Result<RawTensor> {
    let args = ConvTranspose2dArgs {
        stride: (2, 2),
        padding: (1, 1),
        output_padding: (1, 1),
        groups: 2,
        ..Default::default()
    };
    x.conv_transpose2d(w.expect("weight"), b, args)
}

fn ct_dilated(x: &RawTensor, w: Option<&RawTensor>, _: Option<&RawTensor>) -> Result<RawTensor> {
    let args = ConvTranspose2dArgs {
        stride: (1, 2),
        padding: (0, 1),
        output_padding: (0, 1),
        dilation: (2, 1),
        ..Default::default()
    };
    x.conv_transpose2d(w.expect("weight"), None, args)
}

fn c1d(x: &RawTensor, w: Option<&RawTensor>, b: Option<&RawTensor>) -> Result<RawTensor> {
    x.conv1d(w.expect("weight"), b, 2, Conv1dPadding::Explicit(1), 2, 2)
}

fn c1d_same(x: &RawTensor, w: Option<&RawTensor>, b: Option<&RawTensor>) -> Result<RawTensor> {
    x.conv1d(w.expect("weight"), b, 1, Conv1dPadding::Same, 1, 1)
}

/// Each fixture case: its name and the same op in rumus (hyper-parameters as in the script).
const CASES: &[(&str, Op)] = &[
    ("ct_stride2", ct_stride2),
    ("ct_dilated", ct_dilated),
    ("c1d", c1d),
    ("c1d_same", c1d_same),
    ("up_nearest", |x, _, _| x.upsample2d((2, 3), UpsampleMode::Nearest)),
    ("up_bilinear", |x, _, _| x.upsample2d((2, 3), UpsampleMode::Bilinear)),
    ("gap", |x, _, _| x.global_avg_pool2d()),
    ("gmp", |x, _, _| x.global_max_pool2d()),
    ("maxpool1d", |x, _, _| x.max_pool1d(3, 2, 1, 1)),
    ("avgpool1d", |x, _, _| x.avg_pool1d(3, 2, 1)),
];

fn check_fixture_on(device: &Device) -> Result<()> {
    let f = TorchFixture::load("torch_conv_family.safetensors");
    let get = |case: &str, what: &str| -> Result<Option<RawTensor>> {
        f.optional(&format!("{case}.{what}"), device)?.map(|t| t.requires_grad_()).transpose()
    };
    for (case, op) in CASES {
        let x = get(case, "x")?.expect("every case has an input");
        let (w, b) = (get(case, "weight")?, get(case, "bias")?);
        let y = op(&x, w.as_ref(), b.as_ref())?;
        let (want_shape, want) = f.entry(&format!("{case}.y"));
        assert_eq!(y.shape(), &want_shape[..], "{case}: output shape");
        assert_close(&format!("{case} output on {device}"), &y.contiguous()?.to_vec()?, want, 1e-4);
        let gy = get(case, "gy")?.expect("upstream gradient");
        let grads = y.mul(&gy.detach())?.sum_all()?.backward()?;
        for (name, t) in [("x", Some(&x)), ("weight", w.as_ref()), ("bias", b.as_ref())] {
            let Some(t) = t else { continue };
            let got = grads.get(t).unwrap_or_else(|| panic!("{case}: no gradient for {name}")).to_vec()?;
            assert_close(
                &format!("{case} gradient of {name} on {device}"),
                &got,
                f.get(&format!("{case}.grad.{name}")),
                1e-4,
            );
        }
    }
    Ok(())
}

#[test]
fn the_convolution_family_matches_pytorch_on_the_cpu() -> Result<()> {
    check_fixture_on(&Device::cpu())
}

#[test]
fn the_convolution_family_matches_pytorch_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_fixture_on(&gpu)
}

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &Device::cpu()).expect("randn")
}

fn check_gradients(device: &Device) -> Result<()> {
    let on = |t: RawTensor| t.to_device(device).expect("to_device");
    let gc = GradCheck::default();
    // ConvTranspose2d: stride 2 with output padding and groups, then stride 1 with dilation.
    let (x, w, b) = (on(randn(&[2, 4, 3, 3], 1)), on(randn(&[4, 1, 3, 2], 2)), on(randn(&[2], 3)));
    grad_check(&[x, w, b], gc, |i| {
        let args = ConvTranspose2dArgs {
            stride: (2, 3),
            padding: (1, 0),
            output_padding: (1, 2),
            groups: 2,
            ..Default::default()
        };
        i[0].conv_transpose2d(&i[1], Some(&i[2]), args)
    })?;
    let (x, w) = (on(randn(&[1, 2, 3, 4], 4)), on(randn(&[2, 3, 2, 2], 5)));
    grad_check(&[x, w], gc, |i| {
        i[0].conv_transpose2d(&i[1], None, ConvTranspose2dArgs { dilation: (2, 1), ..Default::default() })
    })?;
    // Conv1d, explicit and 'same' padding (odd total, dilation 2).
    let (x, w, b) = (on(randn(&[2, 2, 7], 6)), on(randn(&[3, 2, 3], 7)), on(randn(&[3], 8)));
    grad_check(&[x.clone(), w.clone(), b], gc, |i| {
        i[0].conv1d(&i[1], Some(&i[2]), 2, Conv1dPadding::Explicit(1), 1, 1)
    })?;
    let w2 = on(randn(&[3, 2, 2], 9));
    grad_check(&[x.clone(), w2], gc, |i| i[0].conv1d(&i[1], None, 1, Conv1dPadding::Same, 3, 1))?;
    // Upsampling, global and 1-D pooling.
    let img = on(randn(&[1, 2, 3, 4], 10));
    grad_check(std::slice::from_ref(&img), gc, |i| i[0].upsample2d((2, 3), UpsampleMode::Nearest))?;
    grad_check(std::slice::from_ref(&img), gc, |i| i[0].upsample2d((3, 2), UpsampleMode::Bilinear))?;
    grad_check(std::slice::from_ref(&img), gc, |i| i[0].global_avg_pool2d())?;
    grad_check(std::slice::from_ref(&img), gc, |i| i[0].global_max_pool2d())?;
    grad_check(std::slice::from_ref(&x), gc, |i| i[0].max_pool1d(3, 2, 1, 1))?;
    grad_check(std::slice::from_ref(&x), gc, |i| i[0].avg_pool1d(2, 1, 1))?;
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

/// The layers on both devices from the same weights, on non-contiguous (transposed) inputs.
#[test]
fn layers_agree_between_cpu_and_wgpu_on_views() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    let ct_cfg = ConvTranspose2dConfig {
        stride: (2, 2),
        padding: (1, 1),
        output_padding: (1, 0),
        ..ConvTranspose2dConfig::new(4, 6, (3, 3))
    };
    let c1_cfg = Conv1dConfig { padding: Conv1dPadding::Same, dilation: 2, groups: 2, ..Conv1dConfig::new(4, 6, 3) };
    let layers: Vec<(&str, Vec<usize>, Build)> = vec![
        ("ConvTranspose2d", vec![2, 4, 7, 5], Box::new(move |d| Ok(Box::new(ConvTranspose2d::new(d, ct_cfg, 3)?)))),
        ("Conv1d", vec![2, 4, 9], Box::new(move |d| Ok(Box::new(Conv1d::new(d, c1_cfg, 4)?)))),
        (
            "Upsample bilinear",
            vec![2, 3, 5, 4],
            Box::new(|_| Ok(Box::new(Upsample::new((2, 2), UpsampleMode::Bilinear)))),
        ),
        (
            "Upsample nearest",
            vec![2, 3, 5, 4],
            Box::new(|_| Ok(Box::new(Upsample::new((3, 1), UpsampleMode::Nearest)))),
        ),
        ("GlobalAvgPool", vec![2, 3, 5, 4], Box::new(|_| Ok(Box::new(GlobalAvgPool)))),
        ("GlobalMaxPool", vec![2, 3, 5, 4], Box::new(|_| Ok(Box::new(GlobalMaxPool)))),
        ("MaxPool1d", vec![2, 3, 9], Box::new(|_| Ok(Box::new(MaxPool1d::new(3, 2, 1, 2))))),
        ("AvgPool1d", vec![2, 3, 9], Box::new(|_| Ok(Box::new(AvgPool1d::new(3, 2, 1))))),
    ];
    for (name, shape, build) in layers {
        // The input is stored with its last two axes swapped and viewed back: a strided view.
        let mut stored = shape.clone();
        let r = stored.len();
        stored.swap(r - 1, r - 2);
        let data = randn(&stored, 20);
        assert_layer_parity(name, &data, &build, None, (&cpu, &gpu))?;
    }
    Ok(())
}

#[test]
fn layers_use_pytorchs_names_layouts_and_output_sizes() -> Result<()> {
    let cpu = Device::cpu();
    let ct = ConvTranspose2d::new(
        &cpu,
        ConvTranspose2dConfig {
            stride: (2, 2),
            padding: (1, 1),
            output_padding: (1, 1),
            groups: 2,
            ..ConvTranspose2dConfig::new(4, 6, (3, 3))
        },
        1,
    )?;
    let mut names = Vec::new();
    ct.visit_params("up", &mut |n, p| names.push((n.to_string(), p.tensor().shape().to_vec())));
    assert_eq!(names, [("up.weight".to_string(), vec![4, 3, 3, 3]), ("up.bias".to_string(), vec![6])]);
    // torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)(torch.zeros(1, 4, 7, 7)).shape
    // == [1, 6, 14, 14]; its weights lie in ±1/sqrt(3·3·3).
    assert_eq!(ct.forward_raw(&RawTensor::zeros(&[1, 4, 7, 7], &cpu)?)?.shape(), [1, 6, 14, 14]);
    let bound = 1.0 / 27f32.sqrt();
    assert!(ct.weight.tensor().to_vec()?.iter().all(|w| w.abs() <= bound));
    assert_eq!(
        ct.describe(),
        "ConvTranspose2d(4 => 6, kernel = 3, stride = 2, padding = 1, output_padding = 1, groups = 2)"
    );
    let c1 = Conv1d::new(&cpu, Conv1dConfig { stride: 3, ..Conv1dConfig::new(2, 5, 4) }, 2)?;
    assert_eq!(c1.weight.tensor().shape(), [5, 2, 4]);
    // torch.nn.Conv1d(2, 5, 4, stride=3)(torch.zeros(1, 2, 20)).shape == [1, 5, 6]
    assert_eq!(c1.forward_raw(&RawTensor::zeros(&[1, 2, 20], &cpu)?)?.shape(), [1, 5, 6]);
    assert_eq!(rumus::conv_transpose_extent(7, 3, 2, 1, 1, 1), Some(14));
    assert_eq!(rumus::conv_transpose_extent(1, 1, 1, 1, 0, 1), None);
    Ok(())
}

fn is_shape(r: Result<RawTensor>) -> bool {
    matches!(r, Err(Error::Shape { .. }))
}

fn is_invalid(r: Result<RawTensor>) -> bool {
    matches!(r, Err(Error::InvalidArgument { .. }))
}

#[test]
fn bad_input_is_an_error_naming_the_op() -> Result<()> {
    let cpu = Device::cpu();
    let z = |s: &[usize]| RawTensor::zeros(s, &cpu).expect("zeros");
    let d = ConvTranspose2dArgs::default();
    // ConvTranspose2d: ranks, the weight's input axis, groups, output padding, no output left.
    assert!(is_shape(z(&[4, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), None, d)));
    assert!(is_shape(z(&[1, 3, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), None, d)));
    assert!(is_shape(z(&[1, 3, 5, 5]).conv_transpose2d(
        &z(&[3, 2, 3, 3]),
        None,
        ConvTranspose2dArgs { groups: 2, ..d }
    )));
    assert!(is_invalid(z(&[1, 4, 5, 5]).conv_transpose2d(
        &z(&[4, 2, 3, 3]),
        None,
        ConvTranspose2dArgs { groups: 0, ..d }
    )));
    let op_too_big = ConvTranspose2dArgs { stride: (2, 2), output_padding: (2, 0), dilation: (3, 3), ..d };
    assert!(is_invalid(z(&[1, 4, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), None, op_too_big)));
    assert!(is_shape(z(&[1, 4, 1, 1]).conv_transpose2d(
        &z(&[4, 2, 1, 1]),
        None,
        ConvTranspose2dArgs { padding: (1, 1), ..d }
    )));
    assert!(is_shape(z(&[1, 4, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), Some(&z(&[3])), d)));
    let huge = ConvTranspose2dArgs { stride: (usize::MAX / 2, 1), ..d };
    assert!(z(&[1, 4, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), None, huge).is_err());
    let err = z(&[1, 3, 5, 5]).conv_transpose2d(&z(&[4, 2, 3, 3]), None, d).unwrap_err().to_string();
    assert!(err.contains("conv_transpose2d"), "{err}");
    // Conv1d: rank, 'same' with a stride, channels.
    assert!(is_shape(z(&[1, 2, 5, 5]).conv1d(&z(&[3, 2, 3]), None, 1, Conv1dPadding::Explicit(0), 1, 1)));
    assert!(is_invalid(z(&[1, 2, 9]).conv1d(&z(&[3, 2, 3]), None, 2, Conv1dPadding::Same, 1, 1)));
    assert!(is_shape(z(&[1, 4, 9]).conv1d(&z(&[3, 2, 3]), None, 1, Conv1dPadding::Explicit(0), 1, 1)));
    assert!(z(&[1, 2, 2]).conv1d(&z(&[3, 2, 3]), None, 1, Conv1dPadding::Explicit(0), 1, 1).is_err());
    // Upsample, global and 1-D pooling.
    assert!(is_invalid(z(&[1, 2, 3, 3]).upsample2d((0, 2), UpsampleMode::Nearest)));
    assert!(is_shape(z(&[2, 3, 3]).upsample2d((2, 2), UpsampleMode::Bilinear)));
    assert!(z(&[1, 1, 3, 3]).upsample2d((usize::MAX / 2, 2), UpsampleMode::Nearest).is_err());
    assert!(is_shape(z(&[2, 3, 3]).global_avg_pool2d()));
    assert!(is_shape(z(&[2, 3, 0, 3]).global_max_pool2d()));
    assert!(is_shape(z(&[2, 3, 3, 3]).max_pool1d(2, 2, 0, 1)));
    assert!(is_shape(z(&[2, 3]).avg_pool1d(2, 2, 0)));
    // Layers check their configuration when built.
    assert!(ConvTranspose2d::new(
        &cpu,
        ConvTranspose2dConfig { groups: 3, ..ConvTranspose2dConfig::new(4, 6, (3, 3)) },
        0
    )
    .is_err());
    assert!(ConvTranspose2d::new(
        &cpu,
        ConvTranspose2dConfig { output_padding: (1, 0), ..ConvTranspose2dConfig::new(4, 6, (3, 3)) },
        0
    )
    .is_err());
    assert!(Conv1d::new(
        &cpu,
        Conv1dConfig { stride: 2, padding: Conv1dPadding::Same, ..Conv1dConfig::new(4, 6, 3) },
        0
    )
    .is_err());
    assert!(Conv1d::new(&cpu, Conv1dConfig::new(4, 6, 0), 0).is_err());
    Ok(())
}

mod properties {
    use proptest::prelude::*;
    use rumus::{ConvTranspose2dArgs, Device, RawTensor};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any small geometry: an error, or PyTorch's output size, and then the transposed
        /// convolution is the adjoint of the convolution: ⟨convT(x), y⟩ = ⟨x, conv(y)⟩.
        #[test]
        fn conv_transpose2d_is_the_adjoint_of_conv2d(
            (n, groups, cin_g, cout_g) in (1usize..3, 1usize..3, 1usize..3, 1usize..3),
            (h, w, kh, kw) in (1usize..5, 1usize..5, 1usize..4, 1usize..4),
            (sh, sw, ph, pw) in (1usize..4, 1usize..4, 0usize..3, 0usize..3),
            (oph, opw, dh, dw) in (0usize..3, 0usize..3, 1usize..3, 1usize..3),
        ) {
            let cpu = Device::cpu();
            let (cin, cout) = (cin_g * groups, cout_g * groups);
            let x = RawTensor::randn(&[n, cin, h, w], 0.0, 1.0, 1, &cpu).unwrap();
            let wt = RawTensor::randn(&[cin, cout_g, kh, kw], 0.0, 1.0, 2, &cpu).unwrap();
            let args = ConvTranspose2dArgs {
                stride: (sh, sw),
                padding: (ph, pw),
                output_padding: (oph, opw),
                dilation: (dh, dw),
                groups,
            };
            let out_h = rumus::conv_transpose_extent(h, kh, sh, ph, oph, dh);
            let out_w = rumus::conv_transpose_extent(w, kw, sw, pw, opw, dw);
            match x.conv_transpose2d(&wt, None, args) {
                Ok(y) => {
                    prop_assert!(oph < sh && opw < sw);
                    let (oh, ow) = (out_h.unwrap(), out_w.unwrap());
                    prop_assert_eq!(y.shape(), &[n, cout, oh, ow][..]);
                    let probe = RawTensor::randn(&[n, cout, oh, ow], 0.0, 1.0, 3, &cpu).unwrap();
                    let back = probe.conv2d(&wt, None, (sh, sw), (ph, pw), (dh, dw), groups).unwrap();
                    prop_assert_eq!(back.shape(), x.shape());
                    let dot = |a: &RawTensor, b: &RawTensor| -> f64 {
                        a.to_vec().unwrap().iter().zip(b.to_vec().unwrap()).map(|(p, q)| *p as f64 * q as f64).sum()
                    };
                    let (lhs, rhs) = (dot(&y, &probe), dot(&x, &back));
                    prop_assert!((lhs - rhs).abs() <= 1e-3 * (1.0 + lhs.abs()), "{lhs} vs {rhs}");
                }
                Err(_) => prop_assert!(oph >= sh || opw >= sw || out_h.is_none() || out_w.is_none()),
            }
        }
    }
}
