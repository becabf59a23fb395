use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Net {
    body: layers![Flatten, Linear(10)],
}

fn main() -> rumus::Result<()> {
    let flat = ClassDataset::<Shape1<784>, 10>::new(vec![0.0; 784], vec![0])?;
    let mut net = Net::new(&Device::cpu(), 0)?;
    net.fit(&flat, Fit::epochs(1))?;
    Ok(())
}
