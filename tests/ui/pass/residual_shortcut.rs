// Residual blocks with a projection shortcut: ResNet's downsampling block, and a feature block
// that widens [16] to [32]. Both branches' shapes are computed while expanding the macro.
use rumus::prelude::*;

#[model(input = [3, 16, 16])]
pub struct DownNet {
    stem: layers![Conv2d(8, 3, padding = 1, bias = false), BatchNorm2d, Relu],
    stage: layers![
        Residual(
            Conv2d(16, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu,
            Conv2d(16, 3, padding = 1, bias = false), BatchNorm2d,
            shortcut = (Conv2d(16, 1, stride = 2, bias = false), BatchNorm2d)
        ),
        Relu,
    ],
    head: layers![GlobalAvgPool, Residual(Linear(32), Relu, Linear(32), shortcut = Linear(32)), Linear(5)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let model = DownNet::new(&device, 1)?;
    let x = Tensor::<Shape3<3, 16, 16>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<5>> = model.forward(&x)?;
    assert_eq!(y.shape(), &[2, 5]);
    let h: Tensor<Shape3<16, 8, 8>> = model.forward_stage(&model.forward_stem(&x)?)?;
    assert_eq!(h.shape(), &[2, 16, 8, 8]);
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"stage.0.shortcut.0.weight".to_string()), "{names:?}");
    assert!(names.contains(&"head.1.shortcut.0.bias".to_string()), "{names:?}");
    let trainable: usize = model.parameters().iter().map(|p| p.tensor().numel()).sum();
    assert_eq!(trainable, DownNet::TRAINABLE_PARAMS);
    assert_eq!(rumus::nn::count_trainable(&model), DownNet::TRAINABLE_PARAMS);
    Ok(())
}
