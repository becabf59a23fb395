// Keras's `input_shape`, PyTorch's `nn.Linear`, a twice-given model argument and a too-large
// reshape: each one error, in our terms.
use rumus::prelude::*;

#[model(input_shape = [8])]
pub struct Keras {
    body: layers![Linear(4)],
}

#[model(input = [8])]
pub struct Torch {
    body: layers![nn.Linear(4)],
}

#[model(input = [8], input = [4])]
pub struct Twice {
    body: layers![Linear(4)],
}

#[model(input = [8])]
pub struct Huge {
    body: layers![Reshape(4294967296, 2)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let _ = (Keras::new(&device, 0)?, Torch::new(&device, 0)?, Twice::new(&device, 0)?, Huge::new(&device, 0)?);
    Ok(())
}
