// Validation data must fit the model like the training data.
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
    type Input = Shape1<4>;
    type Output = Shape1<1>;
}

fn main() -> Result<()> {
    let train = TensorDataset::<Shape1<4>, Shape1<1>>::new(vec![0.0; 4], vec![0.0])?;
    let val = TensorDataset::<Shape1<4>, Shape1<2>>::new(vec![0.0; 4], vec![0.0; 2])?;
    let mut net = Net(Linear::new(&Device::cpu(), 4, 1, true, 0)?);
    net.fit(&train, Fit::epochs(1).validation(&val))?;
    Ok(())
}
