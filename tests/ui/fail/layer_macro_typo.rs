use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    body: layer![Linear(4)],
}

fn main() -> rumus::Result<()> {
    let _ = Net::new(&Device::cpu(), 0)?;
    Ok(())
}
