// A model with a shape error: the uses of the model below add no errors of their own.
use rumus::prelude::*;

#[model(input = [1, 12, 12])]
pub struct Net {
    features: layers![Conv2d(16, kernel = 5), MaxPool2d(2), Flatten],
    head: layers![Linear(400 => 120), Relu, Linear(10)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let mut net = Net::new(&device, 0)?;
    let x = Tensor::<Shape3<1, 12, 12>>::zeros(2, &device)?;
    let y = net.forward(&x)?;
    println!("{:?} {:?}", y.shape(), net.forward_features(&x)?.shape());
    let typed: Tensor<Shape1<10>> = net.forward(&x)?;
    println!("{:?} {}", typed.shape(), Net::summary());
    println!("{} {:?}", Net::TRAINABLE_PARAMS, Net::OUTPUT);
    net.train();
    let _ = (net.parameters(), net.named_parameters());
    let data = ClassDataset::<Shape3<1, 12, 12>, 10>::new(vec![0.0; 288], vec![0, 1])?;
    net.fit(&data, Fit::epochs(1))?;
    let _ = rumus::nn::count_trainable(&net);
    net.eval().predict(&Tensor::<Shape3<1, 12, 12>>::zeros(1, &device)?)?;
    Ok(())
}
