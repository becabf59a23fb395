//! Runtime behaviour of `#[model]`-generated code: the generated forward equals a hand-written
//! composition of the same ops with the same weights; compile-time parameter counts equal the
//! real ones; names are PyTorch's; seeds, train/eval and the untyped entry point behave.

use std::collections::HashMap;

use rumus::nn::Module;
use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct LeNet {
    features:
        layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)],
    head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)],
}

#[model(input = [8])]
pub struct Mlp {
    body: layers![Linear(16), Tanh, Linear(16), Relu, Linear(4)],
}

#[model(input = [4])]
pub struct Twins {
    body: layers![Linear(4 => 4), Linear(4 => 4)],
}

#[model(input = [4])]
pub struct Block {
    body: layers![Linear(4 => 6), Sigmoid],
}

#[model(input = [4])]
pub struct Outer {
    first: Block,
    head: layers![Linear(3)],
}

#[model(input = [6])]
pub struct Normed {
    body: layers![Linear(8), BatchNorm1d, Dropout(0.5), Linear(2)],
}

#[model(input = [6], output = [6], forward = custom)]
pub struct Skip {
    body: layers![Linear(6), Relu, Linear(6)],
}

impl Skip {
    pub fn forward(&self, x: &Tensor<Shape1<6>>) -> Result<Tensor<Shape1<6>>> {
        self.forward_body(x)?.add(x)
    }
}

fn params(m: &dyn Module) -> HashMap<String, RawTensor> {
    rumus::nn::named_params(m).into_iter().map(|(n, p)| (n, p.tensor().clone())).collect()
}

fn linear(x: &RawTensor, p: &HashMap<String, RawTensor>, name: &str) -> Result<RawTensor> {
    x.matmul(&p[&format!("{name}.weight")].transpose(0, 1)?)?.add(&p[&format!("{name}.bias")])
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "element {i}: got {g}, want {w}");
    }
}

#[test]
fn lenet_forward_equals_hand_written_ops() -> Result<()> {
    let device = Device::cpu();
    let model = LeNet::new(&device, 42)?;
    let x = Tensor::<Shape3<1, 28, 28>>::randn(3, 7, &device)?;
    let p = params(&model);
    let (s1, p0, d1) = ((1, 1), (0, 0), (1, 1));
    let conv = |h: &RawTensor, name: &str, pad| {
        h.conv2d(&p[&format!("{name}.weight")], Some(&p[&format!("{name}.bias")]), s1, pad, d1, 1)
    };
    let h = conv(x.raw(), "features.0", (2, 2))?.relu()?.max_pool2d((2, 2), (2, 2), p0, d1)?;
    let h = conv(&h, "features.3", p0)?.relu()?.max_pool2d((2, 2), (2, 2), p0, d1)?;
    let h = h.flatten_from(1)?;
    let h = linear(&h, &p, "head.1")?.relu()?;
    let h = linear(&h, &p, "head.3")?.relu()?;
    let want = linear(&h, &p, "head.5")?;

    let got: Tensor<Shape1<10>> = model.forward(&x)?;
    assert_eq!(got.shape(), &[3, 10]);
    assert_close(&got.to_vec()?, &want.to_vec()?);
    // The untyped entry point is the same computation.
    assert_close(&model.forward_raw(x.raw())?.to_vec()?, &want.to_vec()?);
    Ok(())
}

#[test]
fn mlp_forward_equals_hand_written_ops() -> Result<()> {
    let device = Device::cpu();
    let model = Mlp::new(&device, 1)?;
    let x = Tensor::<Shape1<8>>::randn(5, 2, &device)?;
    let p = params(&model);
    let h = linear(x.raw(), &p, "body.0")?.tanh()?;
    let h = linear(&h, &p, "body.2")?.relu()?;
    let want = linear(&h, &p, "body.4")?;
    assert_close(&model.forward(&x)?.to_vec()?, &want.to_vec()?);
    Ok(())
}

#[test]
fn summary_counts_equal_real_parameter_counts() -> Result<()> {
    let device = Device::cpu();
    let lenet = LeNet::new(&device, 0)?;
    assert_eq!(LeNet::TRAINABLE_PARAMS, 61_706);
    assert_eq!(rumus::nn::count_trainable(&lenet), 61_706);
    let summary = LeNet::summary();
    for line in ["Total params: 61,706", "Trainable params: 61,706", "Non-trainable params: 0", "features.3 (Conv2d)"] {
        assert!(summary.contains(line), "summary lacks {line:?}:\n{summary}");
    }
    // Batch-norm running statistics are non-trainable buffers, counted in the total.
    let normed = Normed::new(&device, 0)?;
    let trainable: usize = normed.parameters().iter().map(|p| p.tensor().numel()).sum();
    let buffers: usize = normed.buffers().iter().map(|p| p.tensor().numel()).sum();
    assert_eq!((trainable, trainable + buffers), (Normed::TRAINABLE_PARAMS, Normed::TOTAL_PARAMS));
    assert_eq!(rumus::nn::count_trainable(&normed), Normed::TRAINABLE_PARAMS);
    assert_eq!(Normed::TOTAL_PARAMS - Normed::TRAINABLE_PARAMS, 16);
    assert!(Normed::summary().contains("Non-trainable params: 16"));
    let outer = Outer::new(&device, 0)?;
    assert_eq!(rumus::nn::count_trainable(&outer), Outer::TRAINABLE_PARAMS);
    assert_eq!(Outer::TRAINABLE_PARAMS, 4 * 6 + 6 + 6 * 3 + 3);
    Ok(())
}

#[test]
fn parameter_names_are_pytorch_style() -> Result<()> {
    let device = Device::cpu();
    let names = |m: &dyn Module| {
        rumus::nn::named_params(m).into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect::<Vec<_>>()
    };
    let lenet = LeNet::new(&device, 0)?;
    let want: Vec<(String, Vec<usize>)> = [
        ("features.0.weight", vec![6, 1, 5, 5]),
        ("features.0.bias", vec![6]),
        ("features.3.weight", vec![16, 6, 5, 5]),
        ("features.3.bias", vec![16]),
        ("head.1.weight", vec![120, 400]),
        ("head.1.bias", vec![120]),
        ("head.3.weight", vec![84, 120]),
        ("head.3.bias", vec![84]),
        ("head.5.weight", vec![10, 84]),
        ("head.5.bias", vec![10]),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    assert_eq!(names(&lenet), want);
    let outer = Outer::new(&device, 0)?;
    let got: Vec<String> = outer.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, ["first.body.0.weight", "first.body.0.bias", "head.0.weight", "head.0.bias"]);
    let normed = Normed::new(&device, 0)?;
    let got: Vec<String> = normed.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, ["body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias", "body.3.weight", "body.3.bias"]);
    let got: Vec<String> = normed.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, ["body.1.running_mean", "body.1.running_var"]);
    Ok(())
}

#[test]
fn nested_forward_equals_its_parts() -> Result<()> {
    let device = Device::cpu();
    let outer = Outer::new(&device, 4)?;
    let x = Tensor::<Shape1<4>>::randn(2, 1, &device)?;
    let p = params(&outer);
    let want = linear(&linear(x.raw(), &p, "first.body.0")?.sigmoid()?, &p, "head.0")?;
    let got: Tensor<Shape1<3>> = outer.forward(&x)?;
    assert_close(&got.to_vec()?, &want.to_vec()?);
    Ok(())
}

#[test]
fn custom_forward_is_used_by_every_entry_point() -> Result<()> {
    let device = Device::cpu();
    let skip = Skip::new(&device, 3)?;
    let x = Tensor::<Shape1<6>>::randn(2, 1, &device)?;
    let p = params(&skip);
    let want = linear(&linear(x.raw(), &p, "body.0")?.relu()?, &p, "body.2")?.add(x.raw())?;
    assert_close(&skip.forward(&x)?.to_vec()?, &want.to_vec()?);
    assert_close(&skip.forward_raw(x.raw())?.to_vec()?, &want.to_vec()?);
    Ok(())
}

#[test]
fn seeds_are_distinct_per_layer_and_reproducible() -> Result<()> {
    let device = Device::cpu();
    let a = Mlp::new(&device, 11)?;
    let b = Mlp::new(&device, 11)?;
    let c = Mlp::new(&device, 12)?;
    let pa = params(&a);
    // Two identical layers get different initial weights.
    let twins = params(&Twins::new(&device, 11)?);
    assert_ne!(twins["body.0.weight"].to_vec()?, twins["body.1.weight"].to_vec()?);
    assert_eq!(pa["body.2.weight"].to_vec()?, params(&b)["body.2.weight"].to_vec()?);
    assert_ne!(pa["body.2.weight"].to_vec()?, params(&c)["body.2.weight"].to_vec()?);
    Ok(())
}

#[test]
fn train_and_eval_switch_dropout() -> Result<()> {
    let device = Device::cpu();
    let mut model = Normed::new(&device, 5)?;
    let x = Tensor::<Shape1<6>>::randn(4, 1, &device)?;
    model.eval();
    let e1 = model.forward(&x)?.to_vec()?;
    let e2 = model.forward(&x)?.to_vec()?;
    assert_eq!(e1, e2, "eval mode must be deterministic");
    model.train();
    let t = model.forward(&x)?.to_vec()?;
    assert_ne!(t, e1, "train mode must use dropout and batch statistics");
    Ok(())
}

#[test]
fn untyped_input_of_the_wrong_shape_is_an_error() -> Result<()> {
    let device = Device::cpu();
    let model = LeNet::new(&device, 0)?;
    let wrong = RawTensor::zeros(&[2, 3, 28, 28], &device)?;
    let err = model.forward_raw(&wrong).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("[1, 28, 28]"), "{err}");
    assert_eq!((LeNet::INPUT, LeNet::OUTPUT), (&[1, 28, 28][..], &[10][..]));
    assert_eq!(<LeNet as Model>::Input::DIMS, &[1, 28, 28]);
    assert_eq!(model.describe(), "LeNet");
    Ok(())
}

#[test]
fn models_can_be_declared_inside_functions() -> Result<()> {
    #[model(input = [3])]
    struct Local {
        body: layers![Linear(2)],
    }
    #[model(input = [3])]
    struct LocalOuter {
        inner: Local,
        head: layers![Linear(1)],
    }
    let m = LocalOuter::new(&Device::cpu(), 0)?;
    assert_eq!(m.forward(&Tensor::<Shape1<3>>::zeros(1, &Device::cpu())?)?.shape(), &[1, 1]);
    Ok(())
}
