// The nested model's mistake is reported once, where it is; the models that nest it and their
// uses add nothing.
use rumus::prelude::*;

#[model(input = [8])]
pub struct Inner {
    body: layers![Linear(4), Conv2d(2, kernel = 3)],
}

#[model(input = [8])]
pub struct Outer {
    inner: Inner,
    head: layers![Linear(2)],
}

#[model(input = [8])]
pub struct Outermost {
    outer: Outer,
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let model = Outermost::new(&device, 0)?;
    let y: Tensor<Shape1<2>> = model.forward(&Tensor::<Shape1<8>>::zeros(1, &device)?)?;
    println!("{:?}", y.shape());
    Ok(())
}
