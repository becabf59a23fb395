// Residual blocks: the macro checks that each inner block keeps its input shape.
use rumus::prelude::*;

#[model(input = [3, 16, 16])]
pub struct ResNetTiny {
    stem: layers![Conv2d(8, kernel = 3, padding = same), BatchNorm2d, Relu],
    blocks: layers![
        Residual(Conv2d(8, kernel = 3, padding = 1), BatchNorm2d, Relu, Conv2d(8, kernel = 3, padding = 1)),
        Relu,
        Residual(Conv2d(8, kernel = 3, padding = 1, bias = false), Relu),
    ],
    head: layers![AdaptiveAvgPool2d(1), Flatten, Residual(Linear(8), Tanh), Linear(5)],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let mut model = ResNetTiny::new(&device, 1)?;
    model.eval();
    let x = Tensor::<Shape3<3, 16, 16>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<5>> = model.forward(&x)?;
    assert_eq!(y.shape(), &[2, 5]);
    let trainable: usize = model.parameters().iter().map(|p| p.tensor().numel()).sum();
    let buffers: usize = model.buffers().iter().map(|p| p.tensor().numel()).sum();
    assert_eq!((trainable, trainable + buffers), (ResNetTiny::TRAINABLE_PARAMS, ResNetTiny::TOTAL_PARAMS));
    assert_eq!(rumus::nn::count_trainable(&model), ResNetTiny::TRAINABLE_PARAMS);
    Ok(())
}
