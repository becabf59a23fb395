// A custom typed forward with two paths and a skip; the per-field typed methods keep it typed.
use rumus::prelude::*;

#[model(input = [16], output = [4], forward = custom)]
pub struct TwoPath {
    left: layers![Linear(8), Relu],
    #[input = [16]]
    right: layers![Linear(8), Tanh],
    head: layers![Linear(4)],
}

impl TwoPath {
    pub fn forward(&self, x: &Tensor<Shape1<16>>) -> rumus::Result<Tensor<Shape1<4>>> {
        let l: Tensor<Shape1<8>> = self.forward_left(x)?;
        let r: Tensor<Shape1<8>> = self.forward_right(x)?;
        self.forward_head(&l.add(&r)?)
    }
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let model = TwoPath::new(&device, 9)?;
    let x = Tensor::<Shape1<16>>::randn(3, 0, &device)?;
    let y = model.forward(&x)?;
    assert_eq!(y.shape(), &[3, 4]);
    // The untyped entry point runs the custom forward too.
    let raw = rumus::nn::Module::forward_raw(&model, x.raw())?;
    assert_eq!(raw.to_vec()?, y.to_vec()?);
    assert_eq!(<TwoPath as Model>::Output::DIMS, &[4]);
    Ok(())
}
