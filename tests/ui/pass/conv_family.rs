// The layers of the convolution family (issue #30) in generated models: a convolutional
// autoencoder, a 1-D convolution stack and a global-pooling head.
use rumus::prelude::*;

#[model(input = [1, 28, 28])]
pub struct AutoEncoder {
    encoder: layers![Conv2d(8, kernel = 3, stride = 2, padding = 1), Relu, Conv2d(16, kernel = 3, stride = 2, padding = 1), Relu],
    decoder: layers![
        ConvTranspose2d(16 => 8, kernel = 3, stride = 2, padding = 1, output_padding = 1, dilation = 1, groups = 2),
        Relu,
        ConvTranspose2d(1, kernel = (3, 3), stride = 2, padding = 1, output_padding = 1, bias = false),
        Upsample(2, mode = bilinear),
        Upsample((1, 1), mode = nearest),
        AvgPool2d(2),
        Sigmoid,
    ],
}

#[model(input = [4, 32])]
pub struct Sequence {
    body: layers![
        Conv1d(4 => 8, kernel = 3, stride = 1, padding = same, dilation = 2, groups = 2, bias = true),
        Relu,
        MaxPool1d(2, stride = 2, padding = 1, dilation = 1),
        Conv1d(8, 3, padding = valid),
        AvgPool1d(2, stride = 1, padding = 0),
        Flatten,
        Linear(3),
    ],
}

#[model(input = [3, 9, 9])]
pub struct Head {
    a: layers![Conv2d(6, kernel = 3), GlobalAvgPool, Linear(2)],
}

#[model(input = [3, 9, 9])]
pub struct MaxHead {
    a: layers![Conv2d(6, kernel = 3), GlobalMaxPool],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let ae = AutoEncoder::new(&device, 1)?;
    let x = Tensor::<Shape3<1, 28, 28>>::randn(2, 0, &device)?;
    let y: Tensor<Shape3<1, 28, 28>> = ae.forward(&x)?;
    assert_eq!(y.shape(), &[2, 1, 28, 28]);
    assert_eq!(rumus::nn::count_trainable(&ae), AutoEncoder::TRAINABLE_PARAMS);
    let seq = Sequence::new(&device, 2)?;
    let z: Tensor<Shape1<3>> = seq.forward(&Tensor::<Shape2<4, 32>>::randn(2, 0, &device)?)?;
    assert_eq!(z.shape(), &[2, 3]);
    assert_eq!(rumus::nn::count_trainable(&seq), Sequence::TRAINABLE_PARAMS);
    let h: Tensor<Shape1<2>> = Head::new(&device, 3)?.forward(&Tensor::<Shape3<3, 9, 9>>::randn(2, 0, &device)?)?;
    assert_eq!(h.shape(), &[2, 2]);
    let m: Tensor<Shape1<6>> = MaxHead::new(&device, 3)?.forward(&Tensor::<Shape3<3, 9, 9>>::randn(2, 0, &device)?)?;
    assert_eq!(m.shape(), &[2, 6]);
    println!("{}\n{}", AutoEncoder::summary(), Sequence::summary());
    Ok(())
}
