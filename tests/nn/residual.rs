//! `Residual` with a projection shortcut (`Residual::with_shortcut`, `layers!`'s
//! `Residual(.., shortcut = (..))`): parameter names, the forward against its two branches
//! added, PyTorch's values and gradients (tests/fixtures/make_residual_fixture.py),
//! finite-difference gradients, CPU against wgpu, and a checkpoint round trip.

use rumus::nn::{named_params, BatchNorm2d, Conv2d, Conv2dConfig, Linear, Module, Relu, Residual, Sequential, Tanh};
use rumus::prelude::*;
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};

use crate::common::layer_parity::{assert_layer_parity, Build};
use crate::common::param_grad_check::param_grad_check;
use crate::common::scratch;
use crate::common::torch_fixture::TorchFixture;

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &Device::cpu()).expect("randn")
}

/// A convolution of `cin => cout` channels, kernel `k`, stride `s`, padding `k / 2`.
fn conv(d: &Device, (cin, cout): (usize, usize), k: usize, s: usize, seed: u64) -> Result<Conv2d> {
    let cfg = Conv2dConfig { stride: (s, s), padding: (k / 2, k / 2), ..Conv2dConfig::new(cin, cout, (k, k)) };
    Conv2d::new(d, cfg, seed)
}

/// ResNet's downsampling block, 2 → 3 channels at half the size: conv3×3 stride 2, batch norm,
/// `act`, conv3×3; the shortcut a 1×1 stride-2 convolution and batch norm.
fn down_block(d: &Device, act: impl Module + 'static) -> Result<Residual> {
    let main = Sequential::new()
        .with(conv(d, (2, 3), 3, 2, 1)?)
        .with(BatchNorm2d::new(d, 3, 1e-5, 0.1)?)
        .with(act)
        .with(conv(d, (3, 3), 3, 1, 2)?);
    let shortcut = Sequential::new().with(conv(d, (2, 3), 1, 2, 3)?).with(BatchNorm2d::new(d, 3, 1e-5, 0.1)?);
    Ok(Residual::with_shortcut(main, shortcut))
}

#[test]
fn shortcut_parameters_follow_the_layers_under_shortcut() -> Result<()> {
    let d = Device::cpu();
    let names: Vec<(String, Vec<usize>)> =
        named_params(&down_block(&d, Relu)?).into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect();
    let want: Vec<(&str, &[usize])> = vec![
        ("0.weight", &[3, 2, 3, 3]),
        ("0.bias", &[3]),
        ("1.weight", &[3]),
        ("1.bias", &[3]),
        ("1.running_mean", &[3]),
        ("1.running_var", &[3]),
        ("3.weight", &[3, 3, 3, 3]),
        ("3.bias", &[3]),
        ("shortcut.0.weight", &[3, 2, 1, 1]),
        ("shortcut.0.bias", &[3]),
        ("shortcut.1.weight", &[3]),
        ("shortcut.1.bias", &[3]),
        ("shortcut.1.running_mean", &[3]),
        ("shortcut.1.running_var", &[3]),
    ];
    let want: Vec<(String, Vec<usize>)> = want.into_iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect();
    assert_eq!(names, want);
    // Inside a list, under the block's index, as PyTorch names a child module's children.
    let inner = Sequential::new().with(Linear::new(&d, 4, 6, true, 1)?);
    let model = Sequential::new()
        .with(Residual::with_shortcut(inner, Sequential::new().with(Linear::new(&d, 4, 6, false, 2)?)))
        .with(Tanh);
    let names: Vec<String> = named_params(&model).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.0.weight", "0.0.bias", "0.shortcut.0.weight"]);
    assert_eq!(
        model.describe(),
        "Sequential[Residual(Sequential[Linear(4 => 6)], shortcut = Sequential[Linear(4 => 6)]), Tanh]"
    );
    Ok(())
}

#[test]
fn forward_adds_the_shortcut_to_the_layers() -> Result<()> {
    let d = Device::cpu();
    let block = down_block(&d, Relu)?;
    let x = randn(&[2, 2, 7, 6], 10);
    let y = block.forward_raw(&x)?;
    assert_eq!(y.shape(), &[2, 3, 4, 3]);
    let want = block.inner().forward_raw(&x)?.add(&block.shortcut().expect("a shortcut").forward_raw(&x)?)?;
    assert_eq!(y.to_vec()?, want.to_vec()?);
    // Branches of different shapes are an error naming both, not a broadcast.
    let wrong = Residual::with_shortcut(
        Sequential::new().with(Linear::new(&d, 4, 6, true, 1)?),
        Sequential::new().with(Linear::new(&d, 4, 1, true, 2)?),
    );
    assert_eq!(
        wrong.forward_raw(&randn(&[3, 4], 11)).unwrap_err().to_string(),
        "Residual: input [3, 4]: inner layers produce [3, 6] and the shortcut [3, 1], which cannot be added"
    );
    Ok(())
}

/// The twin's block of tests/fixtures/make_residual_fixture.py, 2 → 4 channels without biases,
/// its weights and running statistics set from the fixture by their PyTorch names.
fn torch_block(d: &Device, fixture: &TorchFixture) -> Result<Residual> {
    let conv = |(cin, cout): (usize, usize), k: usize, s: usize| {
        let cfg = Conv2dConfig {
            stride: (s, s),
            padding: (k / 2, k / 2),
            bias: false,
            ..Conv2dConfig::new(cin, cout, (k, k))
        };
        Conv2d::new(d, cfg, 0)
    };
    let bn = || BatchNorm2d::new(d, 4, 1e-5, 0.1);
    let main = Sequential::new().with(conv((2, 4), 3, 2)?).with(bn()?).with(Relu).with(conv((4, 4), 3, 1)?).with(bn()?);
    let block = Residual::with_shortcut(main, Sequential::new().with(conv((2, 4), 1, 2)?).with(bn()?));
    for (name, p) in named_params(&block) {
        p.assign(&fixture.tensor(&name, d)?)?;
    }
    Ok(block)
}

/// Output, every gradient and the running statistics after one training pass, against PyTorch's.
fn agrees_with_pytorch(d: &Device) -> Result<()> {
    let fixture = TorchFixture::load("torch_residual.safetensors");
    let block = torch_block(d, &fixture)?;
    let x = fixture.tensor("input", d)?.requires_grad_()?;
    let y = block.forward_raw(&x)?;
    assert_close("output", &y.to_vec()?, fixture.get("y"), 1e-4);
    let grads = y.mul(&fixture.tensor("wy", d)?)?.sum_all()?.backward()?;
    assert_close("input gradient", &grads.get(&x).expect("a gradient").to_vec()?, fixture.get("grad.input"), 1e-4);
    for (name, p) in named_params(&block) {
        if p.is_trainable() {
            let g = grads.get(p.tensor()).expect("a gradient").to_vec()?;
            assert_close(&format!("{name} gradient"), &g, fixture.get(&format!("grad.{name}")), 1e-4);
        } else {
            assert_close(&format!("{name} after the pass"), &p.to_vec()?, fixture.get(&format!("after.{name}")), 1e-5);
        }
    }
    Ok(())
}

#[test]
fn values_and_gradients_match_pytorch_on_the_cpu() -> Result<()> {
    agrees_with_pytorch(&Device::cpu())
}

#[test]
fn values_and_gradients_match_pytorch_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    agrees_with_pytorch(&gpu)
}

/// Tanh instead of ReLU keeps the block smooth, so central differences apply everywhere.
#[test]
fn gradients_match_finite_differences() -> Result<()> {
    let block = down_block(&Device::cpu(), Tanh)?;
    let x = randn(&[2, 2, 5, 5], 12);
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| block.forward_raw(&i[0]))?;
    param_grad_check(&block, &x)
}

#[test]
fn cpu_and_wgpu_agree_on_views() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let build: Build = Box::new(|d| Ok(Box::new(down_block(d, Relu)?)));
    // [2, 2, 7, 6] stored with its last two axes swapped: the block sees a strided view.
    let grads = assert_layer_parity(
        "Residual with shortcut",
        &randn(&[2, 2, 6, 7], 13),
        &build,
        Some(40),
        (&Device::cpu(), &gpu),
    )?;
    assert_eq!(grads.len(), 10, "every trainable parameter, the shortcut's included");
    Ok(())
}

/// A downsampling block written in `layers!`, then pooled and classified.
#[model(input = [2, 6, 6])]
struct DownNet {
    body: layers![
        Residual(
            Conv2d(4, 3, stride = 2, padding = 1, bias = false),
            BatchNorm2d,
            Relu,
            Conv2d(4, 3, padding = 1, bias = false),
            BatchNorm2d,
            shortcut = (Conv2d(4, 1, stride = 2, bias = false), BatchNorm2d)
        ),
        Relu,
        GlobalAvgPool,
        Linear(3)
    ],
}

/// The same without the projection: a 1×1 convolution keeps the shortcut an identity's shape.
#[model(input = [2, 6, 6])]
struct PlainNet {
    body: layers![Conv2d(4, 1), Residual(Conv2d(4, 3, padding = 1), Relu), Relu, GlobalAvgPool, Linear(3)],
}

#[test]
fn the_dsl_builds_the_block_and_checkpoints_round_trip() -> Result<()> {
    let d = Device::cpu();
    assert_eq!(DownNet::INPUT, &[2, 6, 6]);
    assert_eq!(DownNet::OUTPUT, &[3]);
    // 72 + 8 + 144 + 8 + 8 + 8 (the shortcut's conv and batch norm) + 15.
    assert_eq!(DownNet::TRAINABLE_PARAMS, 263);
    assert_eq!(DownNet::TOTAL_PARAMS, 263 + 24);
    let mut a = DownNet::new(&d, 1)?;
    let summary = DownNet::summary();
    let row = summary.lines().find(|l| l.starts_with(" body.0 (Residual)")).expect("the block's row");
    assert_eq!(row.split_whitespace().skip(2).collect::<Vec<_>>(), ["[4,", "3,", "3]", "272"], "{summary}");
    let names: Vec<String> = named_params(&a).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names[10..],
        [
            "body.0.shortcut.0.weight",
            "body.0.shortcut.1.weight",
            "body.0.shortcut.1.bias",
            "body.0.shortcut.1.running_mean",
            "body.0.shortcut.1.running_var",
            "body.3.weight",
            "body.3.bias"
        ]
    );
    // A training pass moves the running statistics, which the checkpoint carries too.
    let x = Tensor::<Shape3<2, 6, 6>>::randn(4, 14, &d)?;
    a.forward(&x)?;
    a.eval();
    let dir = scratch("residual_shortcut");
    a.save(dir.join("down.safetensors"))?;
    let mut b = DownNet::new(&d, 2)?;
    b.eval();
    assert_ne!(a.forward(&x)?.raw().to_vec()?, b.forward(&x)?.raw().to_vec()?);
    b.load(dir.join("down.safetensors"))?;
    for ((name, pa), (_, pb)) in named_params(&a).iter().zip(&named_params(&b)) {
        assert_eq!(pa.to_vec()?, pb.to_vec()?, "{name}");
    }
    assert_eq!(a.forward(&x)?.raw().to_vec()?, b.forward(&x)?.raw().to_vec()?);
    // A checkpoint without the shortcut is refused, naming what it lacks.
    PlainNet::new(&d, 3)?.save(dir.join("plain.safetensors"))?;
    let err = b.load(dir.join("plain.safetensors")).unwrap_err().to_string();
    assert!(err.contains("body.0.shortcut.0.weight"), "{err}");
    Ok(())
}
