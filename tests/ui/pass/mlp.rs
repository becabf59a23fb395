// A 784-300-100-10 MLP (LeCun et al. 1998): typed forward, parameter access, train/eval.
use rumus::prelude::*;

#[model(input = [784])]
pub struct Mlp {
    body: layers![Linear(300), Relu, Linear(100), Relu, Linear(10), LogSoftmax],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let mut mlp = Mlp::new(&device, 7)?;
    let x = Tensor::<Shape1<784>>::randn(3, 1, &device)?;
    let y: Tensor<Shape1<10>> = mlp.forward(&x)?;
    assert_eq!(y.shape(), &[3, 10]);
    assert_eq!(Mlp::TRAINABLE_PARAMS, 784 * 300 + 300 + 300 * 100 + 100 + 100 * 10 + 10);
    assert_eq!(rumus::nn::count_trainable(&mlp), Mlp::TRAINABLE_PARAMS);
    assert_eq!((Mlp::INPUT, Mlp::OUTPUT), (&[784][..], &[10][..]));
    let names: Vec<String> = mlp.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "body.4.weight", "body.4.bias"]);
    mlp.eval().train();
    assert!(Mlp::summary().contains("Total params: 266,610"));
    Ok(())
}
