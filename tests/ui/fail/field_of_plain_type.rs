use rumus::prelude::*;

#[model(input = [8])]
pub struct Net {
    body: layers![Linear(4)],
    temperature: f32,
}

fn main() -> rumus::Result<()> {
    let _ = Net::new(&Device::cpu(), 0)?;
    Ok(())
}
