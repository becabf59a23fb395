// Flat 784-vectors cannot feed a model that takes [1, 28, 28] images.
use rumus::nn::{Linear, Module, Param};
use rumus::prelude::*;

struct Net(Linear);

impl Module for Net {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.0.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.0.visit_params(prefix, visitor)
    }
    fn describe(&self) -> String {
        "Net".into()
    }
}

impl Model for Net {
    type Input = Shape3<1, 28, 28>;
    type Output = Shape1<10>;
}

fn main() -> Result<()> {
    let data = ClassDataset::<Shape1<784>, 10>::new(vec![0.0; 784], vec![0])?;
    let mut net = Net(Linear::new(&Device::cpu(), 784, 10, true, 0)?);
    net.fit(&data, Fit::epochs(1))?;
    Ok(())
}
