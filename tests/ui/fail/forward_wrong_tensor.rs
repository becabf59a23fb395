use rumus::prelude::*;

#[model(input = [8])]
pub struct Mlp {
    body: layers![Linear(4), Relu, Linear(2)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let mlp = Mlp::new(&device, 0)?;
    let x = Tensor::<Shape1<7>>::zeros(2, &device)?;
    let _y = mlp.forward(&x)?;
    Ok(())
}
