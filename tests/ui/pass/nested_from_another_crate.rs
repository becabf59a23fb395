// A model declared in another crate nests like a local one: by full path, through the crate's
// `pub use`, or imported with `use`.
use rumus::prelude::*;
use rumus_test_models::TokenEmbedder;

#[model(input = [1, 8, 8])]
pub struct ByPath {
    backbone: rumus_test_models::vision::Backbone,
    head: layers![Linear(3)],
}

#[model(input = [1, 8, 8])]
pub struct ByReexport {
    backbone: rumus_test_models::Backbone,
    head: layers![Linear(3)],
}

#[model(input = [16])]
pub struct ByUse {
    embed: TokenEmbedder,
    head: layers![Flatten, Linear(2)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let x = Tensor::<Shape3<1, 8, 8>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<3>> = ByPath::new(&device, 0)?.forward(&x)?;
    assert_eq!(y.shape(), &[2, 3]);
    let y: Tensor<Shape1<3>> = ByReexport::new(&device, 0)?.forward(&x)?;
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(ByUse::TRAINABLE_PARAMS, 50 * 4 + 64 * 2 + 2);
    Ok(())
}
