// LeNet-5 exactly as in the design: 61,706 parameters, typed forward, summary at compile time.
use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct LeNet {
    features:
        layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)],
    head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let model = LeNet::new(&device, 42)?;
    let x = Tensor::<Shape3<1, 28, 28>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<10>> = model.forward(&x)?;
    assert_eq!(y.shape(), &[2, 10]);
    let f: Tensor<Shape3<16, 5, 5>> = model.forward_features(&x)?;
    assert_eq!(f.shape(), &[2, 16, 5, 5]);
    assert_eq!(LeNet::TRAINABLE_PARAMS, 61_706);
    assert_eq!(rumus::nn::count_trainable(&model), 61_706);
    assert!(LeNet::summary().contains("Total params: 61,706"));
    Ok(())
}
