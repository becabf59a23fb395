// Models broken in different ways, each used the way programs use models: every model reports
// its one mistake and nothing else, wherever it is used.
use rumus::prelude::*;

// An unknown #[model] argument, with `forward = custom` and the user's own forward.
#[model(input = [16], outptu = [16], forward = custom)]
pub struct Custom {
    a: layers![Linear(32), Relu],
    b: layers![Linear(16)],
}

impl Custom {
    pub fn forward(&self, x: &Tensor<Shape1<16>>) -> rumus::Result<Tensor<Shape1<16>>> {
        let h = self.forward_a(x)?;
        self.forward_b(&h)
    }
}

// The input shape is missing.
#[model]
pub struct NoInput {
    body: layers![Linear(4)],
}

// The error is in the last field; the first keeps its types.
#[model(input = [1, 8, 8])]
pub struct TwoFields {
    features: layers![Conv2d(4, kernel = 3), Flatten],
    head: layers![Linear(10 => 2)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let custom = Custom::new(&device, 0)?;
    let y: Tensor<Shape1<16>> = custom.forward(&Tensor::zeros(2, &device)?)?;
    let mut no_input = NoInput::new(&device, 0)?;
    no_input.eval();
    let z = no_input.forward(&Tensor::<Shape1<8>>::zeros(2, &device)?)?;
    let two = TwoFields::new(&device, 0)?;
    let f: Tensor<Shape1<144>> = two.forward_features(&Tensor::zeros(1, &device)?)?;
    let out = two.forward(&Tensor::zeros(1, &device)?)?;
    println!("{:?} {:?} {:?} {:?}", y.shape(), z.shape(), f.shape(), out.shape());
    println!("{} {}", TwoFields::summary(), NoInput::TOTAL_PARAMS);
    Ok(())
}
