//! A batch norm or a `Residual` and the `Relu` after it run as one op (issue #32): the layers'
//! `Module::forward_relu_raw` against `forward_raw` then `Relu`; `Sequential::with_relu`
//! against the two layers pushed apart (values, gradients, running statistics, names,
//! `describe`); and `#[model]`, which builds every `BatchNorm, Relu` and `Residual, Relu` pair
//! of a layer list (inside a `Residual` too) with it: the fused model against the same layers
//! run one by one, and ResNet-18's pairs (its forward and backward against its layers apart).

use rumus::nn::{named_params, BatchNorm1d, BatchNorm2d, Conv2d, Conv2dConfig, Module, Relu, Residual, Sequential};
use rumus::prelude::*;
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus_test_models::ResNet18;

fn devices() -> Vec<Device> {
    [Device::cpu()].into_iter().chain(wgpu_or_skip()).collect()
}

/// Output, gradients of the input and of every trainable parameter of a weighted sum of the
/// output, then every parameter and buffer (the running statistics) after the call.
fn outcome(module: &dyn Module, x: &RawTensor, run: impl Fn(&RawTensor) -> Result<RawTensor>) -> Result<Vec<Vec<f32>>> {
    let x = x.detach().requires_grad_()?;
    let y = run(&x)?;
    let probe = RawTensor::rand_uniform(y.shape(), 0.5, 1.5, 77, x.device())?;
    let grads = y.mul(&probe)?.sum_all()?.backward()?;
    let mut out = vec![y.to_vec()?, grads.get(&x).expect("a gradient of x").to_vec()?];
    for (name, p) in named_params(module) {
        if p.is_trainable() {
            out.push(grads.get(p.tensor()).unwrap_or_else(|| panic!("a gradient of {name}")).to_vec()?);
        }
    }
    for (_, p) in named_params(module) {
        out.push(p.tensor().to_vec()?);
    }
    Ok(out)
}

fn compare(what: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_close(&format!("{what}: result {k}"), g, w, 1e-5);
    }
}

/// `forward_relu_raw` of both batch norms equals `forward_raw` then a ReLU, in training (the
/// running statistics updated alike) and in evaluation.
#[test]
fn batch_norm_forward_relu_equals_forward_then_relu() -> Result<()> {
    for device in devices() {
        for training in [true, false] {
            let x = RawTensor::randn(&[3, 4, 5, 5], 0.5, 1.5, 3, &device)?;
            let layers = || -> Result<BatchNorm2d> {
                let mut bn = BatchNorm2d::new(&device, 4, 1e-5, 0.1)?;
                bn.weight().assign(&RawTensor::from_vec(vec![0.5, 1.5, -1.0, 2.0], &[4], &device)?)?;
                bn.bias().assign(&RawTensor::from_vec(vec![0.1, -0.2, 0.3, 0.0], &[4], &device)?)?;
                bn.set_training(training);
                Ok(bn)
            };
            let (fused, apart) = (layers()?, layers()?);
            let got = outcome(&fused, &x, |x| fused.forward_relu_raw(x))?;
            let want = outcome(&apart, &x, |x| apart.forward_raw(x)?.relu())?;
            compare(&format!("{device} BatchNorm2d training {training}"), &got, &want);

            let x = RawTensor::randn(&[6, 3], 0.0, 1.0, 4, &device)?;
            let (mut fused, mut apart) =
                (BatchNorm1d::new(&device, 3, 1e-5, 0.1)?, BatchNorm1d::new(&device, 3, 1e-5, 0.1)?);
            fused.set_training(training);
            apart.set_training(training);
            let got = outcome(&fused, &x, |x| fused.forward_relu_raw(x))?;
            let want = outcome(&apart, &x, |x| apart.forward_raw(x)?.relu())?;
            compare(&format!("{device} BatchNorm1d training {training}"), &got, &want);
        }
        // The fused path checks its input as forward_raw does.
        let bn = BatchNorm2d::new(&device, 4, 1e-5, 0.1)?;
        let err = bn.forward_relu_raw(&RawTensor::zeros(&[2, 3, 4, 4], &device)?).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "BatchNorm2d", .. }), "{device}: {err}");
    }
    Ok(())
}

/// A residual block `conv, bn, relu, conv, bn` with an identity or a projection (`conv 1×1,
/// bn`) shortcut.
fn plain_block(device: &Device, shortcut: bool) -> Result<Residual> {
    let conv = |k: usize, seed| {
        let padding = (k / 2, k / 2);
        Conv2d::new(device, Conv2dConfig { padding, ..Conv2dConfig::new(3, 3, (k, k)) }, seed)
    };
    let bn = || BatchNorm2d::new(device, 3, 1e-5, 0.1);
    let inner = Sequential::new().with(conv(3, 1)?).with_relu(bn()?).with(conv(3, 2)?).with(bn()?);
    Ok(if shortcut {
        Residual::with_shortcut(inner, Sequential::new().with(conv(1, 3)?).with(bn()?))
    } else {
        Residual::new(inner)
    })
}

/// `forward_relu_raw` of a Residual (its sum and the ReLU in one `add_relu`) equals
/// `forward_raw` then a ReLU, with either shortcut, in training and in evaluation; its shape
/// checks are `forward_raw`'s.
#[test]
fn residual_forward_relu_equals_forward_then_relu() -> Result<()> {
    for device in devices() {
        for shortcut in [false, true] {
            for training in [true, false] {
                let (mut fused, mut apart) = (plain_block(&device, shortcut)?, plain_block(&device, shortcut)?);
                fused.set_training(training);
                apart.set_training(training);
                let x = RawTensor::randn(&[2, 3, 5, 5], 0.0, 1.0, 8, &device)?;
                let got = outcome(&fused, &x, |x| fused.forward_relu_raw(x))?;
                let want = outcome(&apart, &x, |x| apart.forward_raw(x)?.relu())?;
                let zeros = got[0].iter().filter(|v| **v == 0.0).count();
                assert!(zeros > 0 && zeros < got[0].len(), "{device}: the ReLU clamps some outputs, not all");
                compare(&format!("{device} shortcut {shortcut} training {training}"), &got, &want);
            }
        }
        // An inner block that changes the shape is the same error fused or not.
        let wrong = Residual::new(Sequential::new().with(Conv2d::new(&device, Conv2dConfig::new(3, 3, (3, 3)), 1)?));
        let x = RawTensor::zeros(&[1, 3, 5, 5], &device)?;
        let (fused, apart) = (wrong.forward_relu_raw(&x).unwrap_err(), wrong.forward_raw(&x).unwrap_err());
        assert!(matches!(fused, Error::Shape { op: "Residual", .. }), "{device}: {fused}");
        assert_eq!(fused.to_string(), apart.to_string());
        let side = Sequential::new().with(Conv2d::new(&device, Conv2dConfig::new(3, 3, (3, 3)), 2)?);
        let shortcut = Residual::with_shortcut(Sequential::new(), side);
        let (fused, apart) = (shortcut.forward_relu_raw(&x).unwrap_err(), shortcut.forward_raw(&x).unwrap_err());
        assert!(fused.to_string().contains("the shortcut [1, 3, 3, 3]"), "{device}: {fused}");
        assert_eq!(fused.to_string(), apart.to_string());
    }
    Ok(())
}

/// A residual block `conv, bn, relu, conv, bn` built with `with_relu` and with three `with`s.
fn block(device: &Device, fused: bool) -> Result<Residual> {
    let conv = |seed| Conv2d::new(device, Conv2dConfig { padding: (1, 1), ..Conv2dConfig::new(3, 3, (3, 3)) }, seed);
    let bn = || BatchNorm2d::new(device, 3, 1e-5, 0.1);
    let inner = Sequential::new().with(conv(1)?);
    let inner = if fused { inner.with_relu(bn()?) } else { inner.with(bn()?).with(Relu) };
    Ok(Residual::new(inner.with(conv(2)?).with(bn()?)))
}

/// `with_relu` keeps the two layers for names, `len`, `layers()` and `describe`, marks the
/// pair, and runs the values and gradients of the layers apart.
#[test]
fn sequential_with_relu_runs_like_the_layers_apart() -> Result<()> {
    for device in devices() {
        let (fused, apart) = (block(&device, true)?, block(&device, false)?);
        assert_eq!(fused.describe(), apart.describe());
        let names = |m: &dyn Module| named_params(m).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(&fused), names(&apart));
        let inner = fused.inner();
        assert_eq!(inner.len(), 5);
        assert_eq!(inner.layers()[2].describe(), "Relu");
        let marked: Vec<usize> = (0..inner.len()).filter(|&i| inner.runs_with_relu(i)).collect();
        assert_eq!(marked, [1]);
        assert!(!(0..5).any(|i| apart.inner().runs_with_relu(i)));
        let x = RawTensor::randn(&[2, 3, 4, 4], 0.0, 1.0, 9, &device)?;
        let got = outcome(&fused, &x, |x| fused.forward_raw(x))?;
        let want = outcome(&apart, &x, |x| apart.forward_raw(x))?;
        compare(&format!("{device} residual block"), &got, &want);
    }
    Ok(())
}

#[model(input = [3, 6, 6])]
pub struct Fused {
    body: layers![
        Conv2d(4, 3, padding = 1),
        BatchNorm2d,
        Relu,
        Residual(Conv2d(4, 3, padding = 1), BatchNorm2d, Relu, Conv2d(4, 3, padding = 1), BatchNorm2d),
        Relu,
        BatchNorm2d,
        MaxPool2d(2),
        Relu,
        Flatten,
        Linear(8),
        BatchNorm1d,
        Relu,
        Linear(3)
    ],
}

/// The generated model runs each `BatchNorm, Relu` and `Residual, Relu` pair of its list as one
/// op, and its forward
/// and backward equal the same layers run one by one (`forward_raw` each, the Residual's inner
/// pair still fused: `sequential_with_relu_runs_like_the_layers_apart` covers it).
#[test]
fn model_runs_batch_norm_relu_pairs_fused() -> Result<()> {
    for device in devices() {
        let model = Fused::new(&device, 5)?;
        let marked: Vec<usize> = (0..model.body.len()).filter(|&i| model.body.runs_with_relu(i)).collect();
        assert_eq!(
            marked,
            [1, 3, 10],
            "the batch norms and the Residual before a Relu; not the batch norm before MaxPool2d"
        );
        assert_eq!(model.body.len(), 13, "the Relus stay layers");
        let x = RawTensor::randn(&[4, 3, 6, 6], 0.0, 1.0, 6, &device)?;
        for training in [true, false] {
            let (mut model, mut twin) = (Fused::new(&device, 5)?, Fused::new(&device, 5)?);
            model.set_training(training);
            twin.set_training(training);
            let got = outcome(&model, &x, |x| model.forward_raw(x))?;
            let want = outcome(&twin, &x, |x| {
                twin.body.layers().iter().try_fold(x.clone(), |h, layer| layer.forward_raw(&h))
            })?;
            compare(&format!("{device} training {training}"), &got, &want);
        }
    }
    Ok(())
}

/// ResNet-18's stem and the first half of every block run their batch norm and ReLU as one
/// op, and every block its sum and the `Relu` after it (`add_relu`); the Relus stay layers.
#[test]
fn resnet_pairs_are_fused() -> Result<()> {
    let model = ResNet18::new(&Device::cpu(), 1)?;
    assert!(model.stem.runs_with_relu(1));
    assert_eq!(model.stem.layers()[2].describe(), "Relu");
    for stage in [&model.layer1, &model.layer2, &model.layer3, &model.layer4] {
        assert_eq!(stage.len(), 4, "two blocks, each a Residual then a Relu");
        let marked: Vec<usize> = (0..4).filter(|&i| stage.runs_with_relu(i)).collect();
        assert_eq!(marked, [0, 2], "both Residuals");
        assert!(stage.layers()[0].describe().starts_with("Residual("));
        assert_eq!(stage.layers()[1].describe(), "Relu");
    }
    Ok(())
}

/// ResNet-18 with every pair fused (the generated forward) gives the values, the gradients of
/// the input and of every parameter, and the running statistics of its layers run one by one
/// (`forward_raw` each: every block's sum, then its `Relu`), on a batch of 2 in training mode
/// (CPU: `residual_forward_relu_equals_forward_then_relu` covers wgpu at the block's size).
#[test]
fn resnet_fused_equals_its_layers_apart() -> Result<()> {
    let device = Device::cpu();
    let (model, twin) = (ResNet18::new(&device, 2)?, ResNet18::new(&device, 2)?);
    let x = RawTensor::randn(&[2, 3, 32, 32], 0.0, 1.0, 4, &device)?;
    let got = outcome(&model, &x, |x| model.forward_raw(x))?;
    let want = outcome(&twin, &x, |x| {
        let fields = [&twin.stem, &twin.layer1, &twin.layer2, &twin.layer3, &twin.layer4, &twin.head];
        let mut layers = fields.into_iter().flat_map(|f| f.layers());
        layers.try_fold(x.clone(), |h, layer| layer.forward_raw(&h))
    })?;
    compare("ResNet-18", &got, &want);
    Ok(())
}
