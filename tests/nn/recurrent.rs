//! LSTM and GRU: the ops' gradients against finite differences, CPU ↔ wgpu parity forward and
//! backward, the layers (stacked, bidirectional, dropout, last state) and bad input. The
//! PyTorch fixture is checked in `tests/nn/recurrent_fixture.rs`.

use rumus::nn::{Gru, Lstm, Module, RecurrentConfig};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, RecurrentOutput, RecurrentWeights, Result};

const B: usize = 2;
const T: usize = 3;
const F: usize = 3;
const H: usize = 4;

/// Deterministic data in `[-1, 1)`, the same on every device.
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 2.0 - 1.0).collect()
}

fn tensor(shape: &[usize], seed: u64, device: &Device) -> RawTensor {
    RawTensor::from_vec(data(shape.iter().product(), seed), shape, device).unwrap()
}

/// `[x, w_ih, w_hh, b_ih, b_hh, h0, c0]` for a cell of `gates` gates.
fn operands(gates: usize, device: &Device) -> Vec<RawTensor> {
    vec![
        tensor(&[B, T, F], 1, device),
        tensor(&[gates * H, F], 2, device),
        tensor(&[gates * H, H], 3, device),
        tensor(&[gates * H], 4, device),
        tensor(&[gates * H], 5, device),
        tensor(&[B, H], 6, device),
        tensor(&[B, H], 7, device),
    ]
}

/// Every output flattened into one `[B, ·]` tensor, so one check covers `y`, `h_n` and `c_n`.
fn joined(out: RecurrentOutput) -> Result<RawTensor> {
    let y = out.y.reshape(&[B, T * H])?;
    match out.c_n {
        Some(c) => RawTensor::concat(&[&y, &out.h_n, &c], 1),
        None => RawTensor::concat(&[&y, &out.h_n], 1),
    }
}

fn lstm(i: &[RawTensor], reverse: bool) -> Result<RawTensor> {
    let w = RecurrentWeights { w_ih: &i[1], w_hh: &i[2], b_ih: Some(&i[3]), b_hh: Some(&i[4]) };
    joined(i[0].lstm(&w, Some(&i[5]), Some(&i[6]), reverse)?)
}

fn gru(i: &[RawTensor], reverse: bool) -> Result<RawTensor> {
    let w = RecurrentWeights { w_ih: &i[1], w_hh: &i[2], b_ih: Some(&i[3]), b_hh: Some(&i[4]) };
    joined(i[0].gru(&w, Some(&i[5]), reverse)?)
}

fn check_gradients(device: &Device) {
    for reverse in [false, true] {
        grad_check(&operands(4, device), GradCheck::default(), |i| lstm(i, reverse))
            .unwrap_or_else(|e| panic!("lstm on {device}, reverse {reverse}: {e}"));
        grad_check(&operands(3, device)[..6], GradCheck::default(), |i| gru(i, reverse))
            .unwrap_or_else(|e| panic!("gru on {device}, reverse {reverse}: {e}"));
    }
}

#[test]
fn gradients_match_finite_differences_on_cpu() {
    check_gradients(&Device::cpu());
}

#[test]
fn gradients_match_finite_differences_on_wgpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    check_gradients(&gpu);
}

/// A cell's forward values and the gradient of every operand, on one device.
fn values_and_grads(
    device: &Device,
    shapes: &[Vec<usize>],
    f: &dyn Fn(&[RawTensor]) -> Result<RawTensor>,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let leaves: Vec<RawTensor> =
        shapes.iter().enumerate().map(|(k, s)| tensor(s, 40 + k as u64, device).requires_grad_().unwrap()).collect();
    let out = f(&leaves).unwrap();
    let weights = RawTensor::from_vec(data(out.numel(), 99), out.shape(), device).unwrap();
    let grads = out.mul(&weights).unwrap().sum_all().unwrap().backward().unwrap();
    let grads = leaves.iter().map(|l| grads.get(l).expect("every operand gets a gradient").to_vec().unwrap()).collect();
    (out.to_vec().unwrap(), grads)
}

#[test]
fn cpu_and_wgpu_agree_forward_and_backward() {
    let Some(gpu) = wgpu_or_skip() else { return };
    // Sizes past one workgroup's 128 invocations (hidden 130) and several sequences per workgroup
    // are covered by the layer test below; here odd sizes and both directions.
    for (gates, hidden, reverse) in [(4, 5, false), (4, 130, true), (3, 7, true), (3, 130, false)] {
        let (b, t, f) = (3, 4, 6);
        let shapes = vec![
            vec![b, t, f],
            vec![gates * hidden, f],
            vec![gates * hidden, hidden],
            vec![gates * hidden],
            vec![gates * hidden],
            vec![b, hidden],
            vec![b, hidden],
        ];
        let run = |i: &[RawTensor]| -> Result<RawTensor> {
            let w = RecurrentWeights { w_ih: &i[1], w_hh: &i[2], b_ih: Some(&i[3]), b_hh: Some(&i[4]) };
            let out = if gates == 4 {
                i[0].lstm(&w, Some(&i[5]), Some(&i[6]), reverse)?
            } else {
                i[0].gru(&w, Some(&i[5]), reverse)?
            };
            let y = out.y.reshape(&[b, t * hidden])?;
            let mut parts = vec![y, out.h_n];
            parts.extend(out.c_n);
            RawTensor::concat(&parts.iter().collect::<Vec<_>>(), 1)
        };
        let shapes = if gates == 4 { shapes } else { shapes[..6].to_vec() };
        let (cpu_out, cpu_grads) = values_and_grads(&Device::cpu(), &shapes, &run);
        let (gpu_out, gpu_grads) = values_and_grads(&gpu, &shapes, &run);
        let case = format!("gates {gates}, hidden {hidden}, reverse {reverse}");
        assert_close(&format!("{case}: forward"), &gpu_out, &cpu_out, 1e-4);
        for (k, (g, c)) in gpu_grads.iter().zip(&cpu_grads).enumerate() {
            assert_close(&format!("{case}: gradient of operand {k}"), g, c, 1e-3);
        }
    }
}

/// A stacked bidirectional layer with dropout between the layers, on one device: the output,
/// the last state and the gradient of every parameter.
/// The output, the last state and each parameter's name and gradient.
type LayerRun = (Vec<f32>, Vec<f32>, Vec<(String, Vec<f32>)>);

fn layer_run(device: &Device, gru: bool, training: bool) -> LayerRun {
    let config = RecurrentConfig { layers: 2, bidirectional: true, dropout: 0.25, return_sequences: true };
    let mut layer: Box<dyn Module> = if gru {
        Box::new(Gru::new(device, 5, 6, config, 11).unwrap())
    } else {
        Box::new(Lstm::new(device, 5, 6, config, 11).unwrap())
    };
    layer.set_training(training);
    let x = tensor(&[3, 4, 5], 8, device);
    let y = layer.forward_raw(&x).unwrap();
    assert_eq!(y.shape(), &[3, 4, 12]);
    let last_config = RecurrentConfig { return_sequences: false, ..config };
    let last = if gru {
        Gru::new(device, 5, 6, last_config, 11).unwrap().forward_raw(&x).unwrap()
    } else {
        Lstm::new(device, 5, 6, last_config, 11).unwrap().forward_raw(&x).unwrap()
    };
    assert_eq!(last.shape(), &[3, 12]);
    let weights = RawTensor::from_vec(data(y.numel(), 5), y.shape(), device).unwrap();
    let grads = y.mul(&weights).unwrap().sum_all().unwrap().backward().unwrap();
    let params = rumus::nn::named_parameters(layer.as_ref());
    let grads = params
        .iter()
        .map(|(name, p)| {
            (name.clone(), grads.get(p.tensor()).expect("every parameter gets a gradient").to_vec().unwrap())
        })
        .collect();
    (y.to_vec().unwrap(), last.to_vec().unwrap(), grads)
}

#[test]
fn stacked_bidirectional_layers_agree_on_cpu_and_wgpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    for gru in [false, true] {
        for training in [false, true] {
            let (y_cpu, last_cpu, g_cpu) = layer_run(&Device::cpu(), gru, training);
            let (y_gpu, last_gpu, g_gpu) = layer_run(&gpu, gru, training);
            let case = format!("gru {gru}, training {training}");
            assert_close(&format!("{case}: output"), &y_gpu, &y_cpu, 1e-4);
            assert_close(&format!("{case}: last state"), &last_gpu, &last_cpu, 1e-4);
            assert_eq!(g_cpu.len(), 16, "2 layers x 2 directions x 4 tensors");
            for ((name, g), (_, c)) in g_gpu.iter().zip(&g_cpu) {
                assert_close(&format!("{case}: {name}"), g, c, 1e-3);
            }
        }
    }
}

#[test]
fn layers_have_pytorch_names_shapes_and_last_state() -> Result<()> {
    let device = Device::cpu();
    let config = RecurrentConfig { layers: 2, bidirectional: true, dropout: 0.0, return_sequences: false };
    let lstm = Lstm::new(&device, 5, 6, config, 3)?;
    let names: Vec<(String, Vec<usize>)> =
        rumus::nn::named_parameters(&lstm).into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect();
    let expected = [
        ("weight_ih_l0", vec![24, 5]),
        ("weight_hh_l0", vec![24, 6]),
        ("bias_ih_l0", vec![24]),
        ("bias_hh_l0", vec![24]),
        ("weight_ih_l0_reverse", vec![24, 5]),
        ("weight_hh_l0_reverse", vec![24, 6]),
        ("bias_ih_l0_reverse", vec![24]),
        ("bias_hh_l0_reverse", vec![24]),
        ("weight_ih_l1", vec![24, 12]),
        ("weight_hh_l1", vec![24, 6]),
        ("bias_ih_l1", vec![24]),
        ("bias_hh_l1", vec![24]),
        ("weight_ih_l1_reverse", vec![24, 12]),
        ("weight_hh_l1_reverse", vec![24, 6]),
        ("bias_ih_l1_reverse", vec![24]),
        ("bias_hh_l1_reverse", vec![24]),
    ];
    let expected: Vec<(String, Vec<usize>)> = expected.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
    assert_eq!(names, expected);
    // PyTorch's init: every value within ±1/√H.
    let bound = 1.0 / (6f32).sqrt();
    for (name, p) in rumus::nn::named_parameters(&lstm) {
        assert!(p.to_vec()?.iter().all(|v| v.abs() <= bound), "{name} outside ±1/√H");
    }
    // The last state of a bidirectional layer: the forward direction's last step and the
    // backward direction's first, side by side.
    let x = tensor(&[2, 3, 5], 4, &device);
    let full = Lstm::new(&device, 5, 6, RecurrentConfig { return_sequences: true, ..config }, 3)?.forward_raw(&x)?;
    let last = lstm.forward_raw(&x)?;
    let full = full.to_vec()?;
    let want: Vec<f32> = (0..2)
        .flat_map(|b| {
            let fwd = full[(b * 3 + 2) * 12..(b * 3 + 2) * 12 + 6].to_vec();
            let bwd = full[(b * 3) * 12 + 6..(b * 3) * 12 + 12].to_vec();
            fwd.into_iter().chain(bwd)
        })
        .collect();
    assert_close("last state", &last.to_vec()?, &want, 0.0);
    let gru = Gru::new(&device, 5, 6, RecurrentConfig::default(), 3)?;
    assert_eq!(rumus::nn::count_trainable(&gru), 3 * 6 * (5 + 6) + 6 * 6);
    Ok(())
}

#[test]
fn bad_input_is_an_error() {
    let device = Device::cpu();
    let ops = operands(4, &device);
    let w = RecurrentWeights { w_ih: &ops[1], w_hh: &ops[2], b_ih: Some(&ops[3]), b_hh: Some(&ops[4]) };
    let shape_error = |r: Result<RecurrentOutput>, what: &str| match r {
        Err(Error::Shape { .. }) => {}
        other => panic!("{what}: expected a shape error, got {:?}", other.map(|o| o.y.shape().to_vec())),
    };
    shape_error(ops[0].reshape(&[B * T, F]).unwrap().lstm(&w, None, None, false), "2-D input");
    shape_error(tensor(&[B, T, F + 1], 1, &device).lstm(&w, None, None, false), "features");
    shape_error(tensor(&[B, 0, F], 1, &device).lstm(&w, None, None, false), "no steps");
    shape_error(ops[0].lstm(&w, Some(&tensor(&[B, H + 1], 1, &device)), None, false), "h0");
    shape_error(ops[0].lstm(&w, None, Some(&tensor(&[B + 1, H], 1, &device)), false), "c0");
    let bad_hh = tensor(&[4 * H, H + 1], 1, &device);
    shape_error(ops[0].lstm(&RecurrentWeights { w_hh: &bad_hh, ..w }, None, None, false), "w_hh");
    shape_error(ops[0].gru(&w, None, false), "LSTM weights in a GRU");
    let bad_bias = tensor(&[4 * H + 1], 1, &device);
    shape_error(ops[0].lstm(&RecurrentWeights { b_ih: Some(&bad_bias), ..w }, None, None, false), "b_ih");
    let idx = RawTensor::from_indices(&[0; B * T * F], &[B, T, F], &device).unwrap();
    assert!(matches!(idx.lstm(&w, None, None, false), Err(Error::DType { .. })));
    assert!(Lstm::new(&device, 5, 0, RecurrentConfig::default(), 1).is_err(), "hidden 0");
    assert!(Lstm::new(&device, 5, 4, RecurrentConfig { layers: 0, ..RecurrentConfig::default() }, 1).is_err());
    assert!(Gru::new(&device, 5, 4, RecurrentConfig { dropout: 1.5, ..RecurrentConfig::default() }, 1).is_err());
    let layer = Lstm::new(&device, 5, 4, RecurrentConfig::default(), 1).unwrap();
    assert!(layer.forward_raw(&tensor(&[2, 3, 6], 1, &device)).is_err(), "wrong features");
    assert!(layer.forward_raw(&tensor(&[2, 3], 1, &device)).is_err(), "2-D input");
}

#[test]
fn strided_inputs_and_more_sequences_than_workgroups_agree_on_cpu_and_wgpu() {
    let Some(gpu) = wgpu_or_skip() else { return };
    // A transposed (non-contiguous) input, and a batch past the 65,535 workgroups of one
    // dispatch dimension (the kernels walk the sequences with a grid stride).
    for (b, t, f, h) in [(3, 4, 5, 6), (70_000, 2, 16, 16)] {
        let run = |device: &Device| -> (Vec<f32>, Vec<Vec<f32>>) {
            let x = tensor(&[b, f, t], 21, device).requires_grad_().unwrap();
            let leaves: Vec<RawTensor> = [vec![4 * h, f], vec![4 * h, h], vec![4 * h], vec![4 * h]]
                .iter()
                .enumerate()
                .map(|(k, s)| tensor(s, 22 + k as u64, device).requires_grad_().unwrap())
                .collect();
            let w =
                RecurrentWeights { w_ih: &leaves[0], w_hh: &leaves[1], b_ih: Some(&leaves[2]), b_hh: Some(&leaves[3]) };
            let xt = x.transpose(1, 2).unwrap();
            let out = xt.lstm(&w, None, None, true).unwrap();
            let gru = xt.gru(&RecurrentWeights { w_ih: &leaves[0].narrow(0, 0, 3 * h).unwrap(), ..w }, None, false);
            assert!(gru.is_err(), "LSTM-sized w_hh in a GRU");
            let loss = out.y.mul_scalar(0.5).unwrap().sum_all().unwrap().add(&out.h_n.sum_all().unwrap()).unwrap();
            let grads = loss.backward().unwrap();
            let mut all = vec![grads.get(&x).unwrap().to_vec().unwrap()];
            all.extend(leaves.iter().map(|l| grads.get(l).unwrap().to_vec().unwrap()));
            (out.y.to_vec().unwrap(), all)
        };
        let (y_cpu, g_cpu) = run(&Device::cpu());
        let (y_gpu, g_gpu) = run(&gpu);
        assert_close(&format!("batch {b}: y"), &y_gpu, &y_cpu, 1e-4);
        for (k, (g, c)) in g_gpu.iter().zip(&g_cpu).enumerate() {
            assert_close(&format!("batch {b}: gradient {k}"), g, c, 1e-3);
        }
    }
}

#[test]
fn dropout_between_layers_acts_only_while_training() -> Result<()> {
    let device = Device::cpu();
    let x = tensor(&[2, 3, 5], 4, &device);
    let with = RecurrentConfig { layers: 2, dropout: 0.5, ..RecurrentConfig::default() };
    let mut lstm = Lstm::new(&device, 5, 6, with, 9)?;
    let without = Lstm::new(&device, 5, 6, RecurrentConfig { dropout: 0.0, ..with }, 9)?;
    let reference = without.forward_raw(&x)?.to_vec()?;
    let trained = lstm.forward_raw(&x)?.to_vec()?;
    assert_ne!(trained, reference, "dropout changes the output while training");
    lstm.set_training(false);
    assert_eq!(lstm.forward_raw(&x)?.to_vec()?, reference, "no dropout in evaluation");
    Ok(())
}
