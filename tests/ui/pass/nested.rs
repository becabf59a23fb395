// Nested models: a field whose type is another #[model] struct (here from another module and
// declared after its user); the outer model infers the shapes after it.
use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct Classifier {
    backbone: nets::Backbone,
    head: layers![Linear(32), Relu],
    out: nets::Head,
}

mod nets {
    use rumus::prelude::*;

    #[model(input = [1, 28, 28])]
    pub struct Backbone {
        pub conv: layers![Conv2d(4, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }

    #[model(input = [32])]
    pub struct Head {
        pub fc: layers![Linear(10)],
    }
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let model = Classifier::new(&device, 3)?;
    let x = Tensor::<Shape3<1, 28, 28>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<10>> = model.forward(&x)?;
    assert_eq!(y.shape(), &[2, 10]);
    let feats: Tensor<Shape1<676>> = model.forward_backbone(&x)?;
    assert_eq!(feats.shape(), &[2, 676]);
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "backbone.conv.0.weight",
            "backbone.conv.0.bias",
            "head.0.weight",
            "head.0.bias",
            "out.fc.0.weight",
            "out.fc.0.bias"
        ]
    );
    assert_eq!(
        Classifier::TRAINABLE_PARAMS,
        nets::Backbone::TRAINABLE_PARAMS + 676 * 32 + 32 + nets::Head::TRAINABLE_PARAMS
    );
    assert_eq!(rumus::nn::count_trainable(&model), Classifier::TRAINABLE_PARAMS);
    Ok(())
}
