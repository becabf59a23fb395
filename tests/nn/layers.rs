//! The nn layers: parameter names, shapes and counts (PyTorch's), initialisation bounds,
//! train/eval switching, forward values against reference loops, and small models trained with
//! a hand-written SGD loop.

use rumus::nn::{
    count_trainable, named_params, AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Conv2dConfig,
    Dropout, Embedding, Flatten, LayerNorm, Linear, MaxPool2d, Module, MultiHeadAttention, Relu, Reshape, Residual,
    Sequential, Tanh,
};
use rumus::testing::{grad_check, GradCheck};
use rumus::{no_grad, Device, Error, RawTensor, Result};

fn cpu() -> Device {
    Device::cpu()
}

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &cpu()).unwrap()
}

/// `(name, shape, trainable)` of every parameter and buffer, in visiting order.
fn layout_of(module: &dyn Module) -> Vec<(String, Vec<usize>, bool)> {
    named_params(module).into_iter().map(|(n, p)| (n, p.shape().to_vec(), p.is_trainable())).collect()
}

fn entry(name: &str, shape: &[usize], trainable: bool) -> (String, Vec<usize>, bool) {
    (name.to_string(), shape.to_vec(), trainable)
}

#[test]
fn conv2d_parameters_follow_pytorch() -> Result<()> {
    let conv = Conv2d::new(&cpu(), Conv2dConfig::new(1, 6, (5, 5)), 42)?;
    assert_eq!(layout_of(&conv), vec![entry("weight", &[6, 1, 5, 5], true), entry("bias", &[6], true)]);
    assert_eq!(count_trainable(&conv), 156);
    // U(±1/√fan_in) with fan_in = 25.
    assert!(conv.weight.to_vec()?.iter().chain(&conv.bias.as_ref().unwrap().to_vec()?).all(|v| v.abs() <= 0.2));
    assert_eq!(conv.describe(), "Conv2d(1 => 6, kernel = 5)");

    let cfg =
        Conv2dConfig { stride: (2, 2), padding: (1, 0), groups: 2, bias: false, ..Conv2dConfig::new(4, 8, (3, 3)) };
    let grouped = Conv2d::new(&cpu(), cfg, 1)?;
    assert_eq!(layout_of(&grouped), vec![entry("weight", &[8, 2, 3, 3], true)]);
    assert_eq!(
        grouped.describe(),
        "Conv2d(4 => 8, kernel = 3, stride = 2, padding = (1, 0), groups = 2, bias = false)"
    );
    let y = grouped.forward_raw(&randn(&[2, 4, 9, 9], 3))?;
    assert_eq!(y.shape(), &[2, 8, 5, 4]);
    let err = grouped.forward_raw(&randn(&[2, 3, 9, 9], 3)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "conv2d: input [2, 3, 9, 9] weight [8, 2, 3, 3]: input channels 3 and output channels 8 must both be divisible by groups 2"
    );
    assert!(Conv2d::new(&cpu(), Conv2dConfig { groups: 2, ..Conv2dConfig::new(3, 8, (3, 3)) }, 1).is_err());
    // Same seed, same weights.
    let again = Conv2d::new(&cpu(), Conv2dConfig::new(1, 6, (5, 5)), 42)?;
    assert_eq!(again.weight.to_vec()?, conv.weight.to_vec()?);
    Ok(())
}

#[test]
fn lenet_stack_has_the_expected_shapes_and_parameter_count() -> Result<()> {
    let d = cpu();
    let conv = |i, o, k, p, seed| {
        Conv2d::new(&d, Conv2dConfig { padding: (p, p), ..Conv2dConfig::new(i, o, (k, k)) }, seed).unwrap()
    };
    let model = Sequential::new()
        .with(conv(1, 6, 5, 2, 1))
        .with(Relu)
        .with(MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)))
        .with(conv(6, 16, 5, 0, 2))
        .with(Relu)
        .with(MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)))
        .with(Flatten::new())
        .with(Linear::new(&d, 400, 120, true, 3)?)
        .with(Relu)
        .with(Linear::new(&d, 120, 84, true, 4)?)
        .with(Relu)
        .with(Linear::new(&d, 84, 10, true, 5)?);
    // PyTorch's LeNet-5 (padding 2 on the first conv): 156 + 2416 + 48120 + 10164 + 850.
    assert_eq!(count_trainable(&model), 61_706);
    let names: Vec<String> = named_params(&model).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[..4], ["0.weight", "0.bias", "3.weight", "3.bias"]);
    let y = model.forward_raw(&randn(&[3, 1, 28, 28], 6))?;
    assert_eq!(y.shape(), &[3, 10]);
    Ok(())
}

#[test]
fn pooling_and_reshape_layers() -> Result<()> {
    let x = randn(&[2, 3, 8, 6], 10);
    assert_eq!(MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)).forward_raw(&x)?.shape(), &[2, 3, 4, 3]);
    assert_eq!(MaxPool2d::new((3, 3), (1, 1), (1, 1), (2, 2)).forward_raw(&x)?.shape(), &[2, 3, 6, 4]);
    assert_eq!(AvgPool2d::new((3, 2), (2, 2), (1, 0)).forward_raw(&x)?.shape(), &[2, 3, 4, 3]);
    let gap = AdaptiveAvgPool2d::new((1, 1));
    assert_eq!(gap.forward_raw(&x)?.shape(), &[2, 3, 1, 1]);
    assert_eq!(MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)).describe(), "MaxPool2d(kernel = 2)");
    assert_eq!(AvgPool2d::new((3, 3), (1, 1), (1, 1)).describe(), "AvgPool2d(kernel = 3, stride = 1, padding = 1)");
    assert_eq!(gap.describe(), "AdaptiveAvgPool2d(1)");

    let flat = Flatten::new().forward_raw(&x)?;
    assert_eq!(flat.shape(), &[2, 144]);
    assert_eq!(flat.to_vec()?, x.to_vec()?);
    assert_eq!(Flatten::new().forward_raw(&x.transpose(1, 3)?)?.shape(), &[2, 144]);
    let back = Reshape::new(&[3, 8, 6]).forward_raw(&flat)?;
    assert_eq!(back.shape(), &[2, 3, 8, 6]);
    assert_eq!(back.to_vec()?, x.to_vec()?);
    let err = Reshape::new(&[5, 5]).forward_raw(&flat).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Reshape: input [2, 144]: samples of 144 elements cannot be reshaped to [5, 5] (25 elements)"
    );
    let err = MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)).forward_raw(&flat).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "max_pool2d", .. }), "{err}");
    Ok(())
}

#[test]
fn batch_norm_layers_track_statistics_and_switch_modes() -> Result<()> {
    let mut bn = BatchNorm2d::new(&cpu(), 3, 1e-5, 0.1)?;
    assert_eq!(
        layout_of(&bn),
        vec![
            entry("weight", &[3], true),
            entry("bias", &[3], true),
            entry("running_mean", &[3], false),
            entry("running_var", &[3], false),
        ]
    );
    assert_eq!(count_trainable(&bn), 6);
    assert!(bn.is_training(), "layers start in training mode");
    let x = randn(&[4, 3, 2, 5], 20).mul_scalar(2.0)?.add_scalar(1.0)?;
    let y = bn.forward_raw(&x)?;
    // Training output: zero mean, unit (biased) variance per channel.
    let mean = y.mean(&[0, 2, 3], false)?.to_vec()?;
    let var = y.mul(&y)?.mean(&[0, 2, 3], false)?.to_vec()?;
    assert!(mean.iter().all(|m| m.abs() < 1e-5) && var.iter().all(|v| (v - 1.0).abs() < 1e-3));
    // Running stats: 0.9·initial + 0.1·batch statistic (unbiased variance, n = 40).
    let batch_mean = x.mean(&[0, 2, 3], false)?.to_vec()?;
    let centered = x.sub(&x.mean(&[0, 2, 3], true)?)?;
    let unbiased = centered.mul(&centered)?.sum(&[0, 2, 3], false)?.mul_scalar(1.0 / 39.0)?.to_vec()?;
    let running_mean = bn.running_mean().to_vec()?;
    let running_var = bn.running_var().to_vec()?;
    for c in 0..3 {
        assert!((running_mean[c] - 0.1 * batch_mean[c]).abs() < 1e-5);
        assert!((running_var[c] - (0.9 + 0.1 * unbiased[c])).abs() < 1e-4);
    }
    // Evaluation uses (and keeps) the running statistics; a batch of one is fine there.
    bn.set_training(false);
    let one = x.narrow(0, 0, 1)?;
    let y_eval = bn.forward_raw(&one)?.to_vec()?;
    let first = one.to_vec()?[0];
    assert!((y_eval[0] - (first - running_mean[0]) / (running_var[0] + 1e-5).sqrt()).abs() < 1e-5);
    assert_eq!(bn.running_mean().to_vec()?, running_mean);
    let err = bn.forward_raw(&randn(&[2, 4, 2, 2], 1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "BatchNorm2d: input [2, 4, 2, 2]: expected [batch, channels, height, width] with 3 channels"
    );

    let mut bn1 = BatchNorm1d::new(&cpu(), 4, 1e-5, 0.1)?;
    assert_eq!(bn1.forward_raw(&randn(&[5, 4], 21))?.shape(), &[5, 4]);
    assert_eq!(bn1.forward_raw(&randn(&[5, 4, 7], 22))?.shape(), &[5, 4, 7]);
    assert!(bn1.forward_raw(&randn(&[5, 4, 7, 1], 22)).is_err());
    // Sequential forwards the mode switch.
    let mut seq = Sequential::new().with(BatchNorm1d::new(&cpu(), 4, 1e-5, 0.1)?);
    seq.set_training(false);
    let z = randn(&[1, 4], 23);
    assert_eq!(seq.forward_raw(&z)?.to_vec()?.iter().map(|v| (v * 1e3).round()).collect::<Vec<_>>(), {
        z.to_vec()?.iter().map(|v| (v / (1.0f32 + 1e-5).sqrt() * 1e3).round()).collect::<Vec<_>>()
    });
    bn1.set_training(false);
    assert!(!bn1.is_training());
    Ok(())
}

#[test]
fn layer_norm_and_embedding_layers() -> Result<()> {
    let ln = LayerNorm::new(&cpu(), &[3, 4], 1e-5, true)?;
    assert_eq!(layout_of(&ln), vec![entry("weight", &[3, 4], true), entry("bias", &[3, 4], true)]);
    let y = ln.forward_raw(&randn(&[2, 3, 4], 30))?;
    let per_sample_mean = y.mean(&[1, 2], false)?.to_vec()?;
    assert!(per_sample_mean.iter().all(|m| m.abs() < 1e-5));
    assert_eq!(count_trainable(&LayerNorm::new(&cpu(), &[8], 1e-5, false)?), 0);
    assert!(ln.forward_raw(&randn(&[2, 4, 3], 30)).is_err());

    let emb = Embedding::new(&cpu(), 10, 4, 7)?;
    assert_eq!(layout_of(&emb), vec![entry("weight", &[10, 4], true)]);
    let weights = emb.weight.to_vec()?;
    let mean = weights.iter().sum::<f32>() / 40.0;
    assert!(mean.abs() < 0.5 && weights.iter().any(|w| w.abs() > 1.0), "N(0, 1) init");
    let tokens = RawTensor::from_indices(&[3, 0, 9, 3, 3, 1], &[2, 3], &cpu())?;
    let out = emb.forward_raw(&tokens)?;
    assert_eq!(out.shape(), &[2, 3, 4]);
    assert_eq!(out.to_vec()?[..4], weights[12..16]);
    // Gradient of the sum: each row counts how often its token appears.
    let grads = out.sum_all()?.backward()?;
    let g = grads.get(emb.weight.tensor()).unwrap().to_vec()?;
    assert_eq!(g[12..16], [3.0; 4]);
    assert_eq!(g[4..8], [1.0; 4]);
    assert_eq!(g[8..12], [0.0; 4]);
    let bad = RawTensor::from_indices(&[3, 10], &[1, 2], &cpu())?;
    let err = emb.forward_raw(&bad).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { op: "embedding", index: 10, limit: 10, position: 1 }), "{err}");
    Ok(())
}

#[test]
fn dropout_layer_draws_a_new_mask_per_call_and_is_off_in_eval() -> Result<()> {
    let x = RawTensor::ones(&[64, 64], &cpu())?;
    let mut drop = Dropout::new(0.5, 11);
    let first = drop.forward_raw(&x)?.to_vec()?;
    let second = drop.forward_raw(&x)?.to_vec()?;
    assert_ne!(first, second, "each call draws a new mask");
    assert!(first.iter().all(|&v| v == 0.0 || v == 2.0));
    // The same seed replays the same sequence of masks.
    let replay = Dropout::new(0.5, 11);
    assert_eq!(replay.forward_raw(&x)?.to_vec()?, first);
    assert_eq!(replay.forward_raw(&x)?.to_vec()?, second);
    assert_ne!(Dropout::new(0.5, 12).forward_raw(&x)?.to_vec()?, first);
    drop.set_training(false);
    assert_eq!(drop.forward_raw(&x)?.to_vec()?, x.to_vec()?);
    assert!(Dropout::new(-0.1, 1).forward_raw(&x).is_err());
    assert_eq!(drop.describe(), "Dropout(0.5)");
    Ok(())
}

#[test]
fn residual_adds_its_input_and_names_params_transparently() -> Result<()> {
    let d = cpu();
    let inner =
        Sequential::new().with(Linear::new(&d, 4, 8, true, 1)?).with(Relu).with(Linear::new(&d, 8, 4, true, 2)?);
    let reference =
        Sequential::new().with(Linear::new(&d, 4, 8, true, 1)?).with(Relu).with(Linear::new(&d, 8, 4, true, 2)?);
    let model = Sequential::new().with(Residual::new(inner)).with(Tanh);
    let names: Vec<String> = named_params(&model).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias"]);
    let x = randn(&[3, 4], 40);
    let want = x.add(&reference.forward_raw(&x)?)?.tanh()?.to_vec()?;
    assert_eq!(model.forward_raw(&x)?.to_vec()?, want);
    let mismatched = Residual::new(Sequential::new().with(Linear::new(&d, 4, 1, true, 3)?));
    let err = mismatched.forward_raw(&x).unwrap_err();
    assert_eq!(err.to_string(), "Residual: input [3, 4]: inner layers produce [3, 1], which cannot be added to it");
    Ok(())
}

/// Reference self-attention with host loops over `(batch, head, query, key)`.
fn naive_attention(x: &[f32], n: usize, t: usize, e: usize, heads: usize, mha: &MultiHeadAttention) -> Vec<f32> {
    let w = mha.in_proj_weight.to_vec().unwrap();
    let b = mha.in_proj_bias.to_vec().unwrap();
    let wo = mha.out_proj.weight.to_vec().unwrap();
    let bo = mha.out_proj.bias.as_ref().unwrap().to_vec().unwrap();
    let d = e / heads;
    let linear = |input: &[f32], w: &[f32], b: &[f32], rows: usize| -> Vec<f32> {
        (0..rows).map(|r| b[r] + (0..e).map(|c| w[r * e + c] * input[c]).sum::<f32>()).collect()
    };
    let mut out = Vec::new();
    for s in 0..n {
        let qkv: Vec<Vec<f32>> = (0..t).map(|i| linear(&x[(s * t + i) * e..][..e], &w, &b, 3 * e)).collect();
        let mut merged = vec![vec![0.0; e]; t];
        for h in 0..heads {
            for i in 0..t {
                let scores: Vec<f32> = (0..t)
                    .map(|j| (0..d).map(|k| qkv[i][h * d + k] * qkv[j][e + h * d + k]).sum::<f32>() / (d as f32).sqrt())
                    .collect();
                let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let z: f32 = scores.iter().map(|v| (v - max).exp()).sum();
                for j in 0..t {
                    let p = (scores[j] - max).exp() / z;
                    for k in 0..d {
                        merged[i][h * d + k] += p * qkv[j][2 * e + h * d + k];
                    }
                }
            }
        }
        for row in &merged {
            out.extend(linear(row, &wo, &bo, e));
        }
    }
    out
}

#[test]
fn multi_head_attention_matches_a_reference_and_pytorch_names() -> Result<()> {
    let (n, t, e, heads) = (2, 5, 8, 2);
    let mha = MultiHeadAttention::new(&cpu(), e, heads, 9)?;
    assert_eq!(
        layout_of(&mha),
        vec![
            entry("in_proj_weight", &[24, 8], true),
            entry("in_proj_bias", &[24], true),
            entry("out_proj.weight", &[8, 8], true),
            entry("out_proj.bias", &[8], true),
        ]
    );
    assert_eq!(count_trainable(&mha), 4 * e * e + 4 * e);
    // Xavier bound √(6 / (e + 3e)); biases start at zero.
    let bound = (6.0f32 / 32.0).sqrt();
    assert!(mha.in_proj_weight.to_vec()?.iter().all(|v| v.abs() <= bound));
    assert!(mha.in_proj_bias.to_vec()?.iter().chain(&mha.out_proj.bias.as_ref().unwrap().to_vec()?).all(|&v| v == 0.0));
    // Non-zero biases so the reference exercises them.
    mha.in_proj_bias.assign(&randn(&[24], 50))?;
    mha.out_proj.bias.as_ref().unwrap().assign(&randn(&[8], 51))?;
    let x = randn(&[n, t, e], 52);
    let got = mha.forward_raw(&x)?;
    assert_eq!(got.shape(), &[n, t, e]);
    let want = naive_attention(&x.to_vec()?, n, t, e, heads, &mha);
    for (g, w) in got.to_vec()?.iter().zip(&want) {
        assert!((g - w).abs() < 1e-4, "{g} vs {w}");
    }
    let small = MultiHeadAttention::new(&cpu(), 4, 2, 3)?;
    grad_check(&[randn(&[1, 3, 4], 53)], GradCheck::default(), |i| small.forward_raw(&i[0]))?;
    assert!(MultiHeadAttention::new(&cpu(), 10, 3, 1).is_err());
    assert_eq!(
        mha.forward_raw(&randn(&[2, 5, 6], 1)).unwrap_err().to_string(),
        "MultiHeadAttention: input [2, 5, 6]: expected [batch, time, 8]"
    );
    Ok(())
}

/// One step of plain SGD on every trainable parameter: `p ← p - lr·∂loss/∂p`.
fn sgd_step(model: &dyn Module, grads: &rumus::Gradients, lr: f32) -> Result<()> {
    for (name, param) in named_params(model) {
        if !param.is_trainable() {
            continue;
        }
        let grad = grads.get(param.tensor()).unwrap_or_else(|| panic!("no gradient for {name}"));
        let updated = no_grad(|| param.tensor().sub(&grad.mul_scalar(lr)?))?;
        param.assign(&updated)?;
    }
    Ok(())
}

/// Two interleaved spirals, 2 × `per_class` points, generated deterministically.
fn two_spirals(per_class: usize) -> (Vec<f32>, Vec<u32>) {
    let (mut points, mut labels) = (Vec::new(), Vec::new());
    for class in 0..2u32 {
        for i in 0..per_class {
            let r = 0.2 + 0.8 * i as f32 / per_class as f32;
            let angle = 3.0 * r * std::f32::consts::PI + class as f32 * std::f32::consts::PI;
            points.extend([r * angle.cos(), r * angle.sin()]);
            labels.push(class);
        }
    }
    (points, labels)
}

#[test]
fn mlp_learns_two_spirals_with_plain_sgd() -> Result<()> {
    let d = cpu();
    let (points, labels) = two_spirals(50);
    let x = RawTensor::from_vec(points, &[100, 2], &d)?;
    let y = RawTensor::from_indices(&labels, &[100], &d)?;
    let model = Sequential::new()
        .with(Linear::new(&d, 2, 32, true, 1)?)
        .with(Tanh)
        .with(Linear::new(&d, 32, 32, true, 2)?)
        .with(Tanh)
        .with(Linear::new(&d, 32, 2, true, 3)?);
    let initial = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?.item()?;
    let mut loss_value = initial;
    for _ in 0..STEPS {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        loss_value = loss.item()?;
        let grads = loss.backward()?;
        sgd_step(&model, &grads, LR)?;
    }
    let logits = no_grad(|| model.forward_raw(&x))?;
    let correct = logits.argmax(1)?.to_vec_u32()?.iter().zip(&labels).filter(|(a, b)| a == b).count();
    assert!(loss_value < LOSS_THRESHOLD, "loss {initial} → {loss_value} after {STEPS} steps");
    assert!(correct >= 97, "accuracy {correct}/100");
    Ok(())
}

const STEPS: usize = 1500;
const LR: f32 = 0.5;
const LOSS_THRESHOLD: f32 = 0.1;

/// 6×6 images with one bright horizontal (class 0) or vertical (class 1) bar plus noise.
fn bars(count: usize, seed: u64) -> Result<(RawTensor, RawTensor)> {
    let noise = RawTensor::rand_uniform(&[count, 1, 6, 6], 0.0, 0.3, seed, &cpu())?.to_vec()?;
    let (mut images, mut labels) = (noise, Vec::new());
    for s in 0..count {
        let (class, line) = ((s % 2) as u32, (s * 7 / 2) % 6);
        for k in 0..6 {
            let (r, c) = if class == 0 { (line, k) } else { (k, line) };
            images[s * 36 + r * 6 + c] += 1.0;
        }
        labels.push(class);
    }
    Ok((RawTensor::from_vec(images, &[count, 1, 6, 6], &cpu())?, RawTensor::from_indices(&labels, &[count], &cpu())?))
}

#[test]
fn small_cnn_with_batch_norm_and_dropout_learns_bars() -> Result<()> {
    let d = cpu();
    let mut model = Sequential::new()
        .with(Conv2d::new(&d, Conv2dConfig { padding: (1, 1), ..Conv2dConfig::new(1, 4, (3, 3)) }, 1)?)
        .with(BatchNorm2d::new(&d, 4, 1e-5, 0.1)?)
        .with(Relu)
        .with(MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)))
        .with(Flatten::new())
        .with(Dropout::new(0.1, 2))
        .with(Linear::new(&d, 36, 2, true, 3)?);
    let (x, y) = bars(32, 4)?;
    for _ in 0..60 {
        let loss = model.forward_raw(&x)?.cross_entropy(&y, 0.0)?;
        let grads = loss.backward()?;
        sgd_step(&model, &grads, 0.2)?;
    }
    model.set_training(false);
    let (test_x, test_y) = bars(20, 5)?;
    let loss = no_grad(|| model.forward_raw(&test_x)?.cross_entropy(&test_y, 0.0))?.item()?;
    let predictions = no_grad(|| model.forward_raw(&test_x))?.argmax(1)?.to_vec_u32()?;
    let correct = predictions.iter().zip(test_y.to_vec_u32()?).filter(|(a, b)| **a == *b).count();
    assert!(loss < 0.2 && correct == 20, "held-out loss {loss}, accuracy {correct}/20");
    Ok(())
}

#[test]
fn every_layer_describes_itself() -> Result<()> {
    let d = cpu();
    let layers: Vec<(Box<dyn Module>, &str)> = vec![
        (Box::new(Flatten::new()), "Flatten"),
        (Box::new(Reshape::new(&[4, 4])), "Reshape([4, 4])"),
        (Box::new(BatchNorm1d::new(&d, 3, 1e-5, 0.1)?), "BatchNorm1d(3)"),
        (Box::new(BatchNorm2d::new(&d, 3, 1e-5, 0.1)?), "BatchNorm2d(3)"),
        (Box::new(LayerNorm::new(&d, &[5], 1e-5, true)?), "LayerNorm([5])"),
        (Box::new(Embedding::new(&d, 7, 3, 0)?), "Embedding(7, 3)"),
        (Box::new(MultiHeadAttention::new(&d, 8, 4, 0)?), "MultiHeadAttention(embed_dim = 8, num_heads = 4)"),
        (Box::new(Residual::new(Sequential::new().with(Relu))), "Residual(Sequential[Relu])"),
    ];
    for (layer, want) in layers {
        assert_eq!(layer.describe(), want);
    }
    Ok(())
}
