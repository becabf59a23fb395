// Every built-in layer at least once, with most arguments, in two models.
use rumus::prelude::*;

#[model(input = [3, 20, 20])]
pub struct Vision {
    convs: layers![
        Conv2d(3 => 12, kernel = (3, 5), stride = 1, padding = same, dilation = 1, groups = 3, bias = false),
        BatchNorm2d(12, eps = 1e-3, momentum = 0.2),
        GroupNorm(4, 12, eps = 1e-5, affine = true),
        InstanceNorm2d(affine = true),
        LeakyRelu(slope = 0.1),
        MaxPool2d(3, stride = 2, padding = 1, dilation = 1),
        Conv2d(12, kernel = 3, dilation = 2, padding = valid),
        Gelu,
        AvgPool2d(2, stride = 1, padding = 1),
        AdaptiveAvgPool2d(3, 3),
    ],
    head: layers![
        Flatten, Reshape(12, -1), Flatten, Dropout(0.25), Linear(108 => 32, bias = true), BatchNorm1d, Silu, Sigmoid, Tanh,
        GeluTanh, Relu, Residual(Linear(32), Relu), Linear(10), Softmax(axis = -1), LogSoftmax(0),
    ],
}

#[model(input = [12])]
pub struct Sequence {
    body: layers![
        Embedding(50, 16),
        MultiHeadAttention(4),
        LayerNorm(16, eps = 1e-5, affine = true),
        LayerNorm,
        RmsNorm(16, eps = 1e-6, affine = true),
        Linear(8)
    ],
}

#[model(input = [6, 5])]
pub struct Recurrent {
    body: layers![
        Lstm(8, layers = 2, bidirectional = true, dropout = 0.1, return_sequences = true),
        Gru(4, return_sequences = false),
        Linear(3)
    ],
}

fn main() -> rumus::Result<()> {
    let device = Device::cpu();
    let mut vision = Vision::new(&device, 5)?;
    vision.eval();
    let x = Tensor::<Shape3<3, 20, 20>>::randn(2, 0, &device)?;
    let y: Tensor<Shape1<10>> = vision.forward(&x)?;
    assert_eq!(y.shape(), &[2, 10]);
    let trainable: usize = vision.parameters().iter().map(|p| p.tensor().numel()).sum();
    let buffers: usize = vision.buffers().iter().map(|p| p.tensor().numel()).sum();
    assert_eq!((trainable, trainable + buffers), (Vision::TRAINABLE_PARAMS, Vision::TOTAL_PARAMS));

    let seq = Sequence::new(&device, 5)?;
    let tokens: Vec<u32> = (0..24).map(|i| (i * 7) % 50).collect();
    let ids = Tensor::<Shape1<12>>::from_raw(RawTensor::from_indices(&tokens, &[2, 12], &device)?)?;
    let z: Tensor<Shape2<12, 8>> = seq.forward(&ids)?;
    assert_eq!(z.shape(), &[2, 12, 8]);
    assert_eq!(rumus::nn::count_trainable(&seq), Sequence::TRAINABLE_PARAMS);
    let mut rnn = Recurrent::new(&device, 5)?;
    rnn.eval();
    let r: Tensor<Shape1<3>> = rnn.forward(&Tensor::<Shape2<6, 5>>::randn(2, 0, &device)?)?;
    assert_eq!(r.shape(), &[2, 3]);
    assert_eq!(rumus::nn::count_trainable(&rnn), Recurrent::TRAINABLE_PARAMS);
    println!("{}\n{}\n{}", Vision::summary(), Sequence::summary(), Recurrent::summary());
    Ok(())
}
