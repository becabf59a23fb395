//! Interchange with PyTorch: nn.LSTM and nn.GRU (one layer with initial states, two
//! bidirectional layers), their weights, input, outputs and the gradients of a fixed loss made
//! by PyTorch in float64 (`tests/fixtures/make_rnn_fixture.py`). rumus's ops and layers, given
//! PyTorch's weights by name, must give PyTorch's numbers on the CPU and on wgpu.

use crate::common::torch_fixture::TorchFixture;
use rumus::nn::{named_parameters, Gru, Lstm, Module, RecurrentConfig};
use rumus::prelude::*;
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::RecurrentWeights;

/// The fixture's two-layer bidirectional LSTM as the macro generates it.
#[model(input = [5, 3])]
pub struct BiLstm {
    rnn: layers![Lstm(4, layers = 2, bidirectional = true)],
}

/// The fixture's two-layer bidirectional GRU, keeping the last state only.
#[model(input = [5, 3])]
pub struct BiGruLast {
    rnn: layers![Gru(4, layers = 2, bidirectional = true, return_sequences = false)],
}

const TOL: f32 = 2e-5;
const GRAD_TOL: f32 = 1e-4;

/// The one-layer cases through the ops, with the initial states: `y`, `h_n`, `c_n`, the loss
/// and the gradients of the input, the four weights and the initial states.
fn check_op(f: &TorchFixture, case: &str, device: &Device) -> Result<()> {
    let lstm = case == "lstm";
    let names = ["input", "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "h0", "c0"];
    let names = if lstm { &names[..] } else { &names[..6] };
    let leaves = names
        .iter()
        .map(|n| f.tensor(&format!("{case}.{n}"), device).and_then(|t| t.requires_grad_()))
        .collect::<Result<Vec<RawTensor>>>()?;
    let w = RecurrentWeights { w_ih: &leaves[1], w_hh: &leaves[2], b_ih: Some(&leaves[3]), b_hh: Some(&leaves[4]) };
    let out = if lstm {
        leaves[0].lstm(&w, Some(&leaves[5]), Some(&leaves[6]), false)?
    } else {
        leaves[0].gru(&w, Some(&leaves[5]), false)?
    };
    let at = format!("{case} on {device}");
    assert_close(&format!("{at}: y"), &out.y.to_vec()?, f.get(&format!("{case}.y")), TOL);
    assert_close(&format!("{at}: h_n"), &out.h_n.to_vec()?, f.get(&format!("{case}.h_n")), TOL);
    let mut loss = out.y.mul(&f.tensor(&format!("{case}.wy"), device)?)?.sum_all()?;
    loss = loss.add(&out.h_n.mul(&f.tensor(&format!("{case}.wh"), device)?)?.sum_all()?)?;
    if let Some(c_n) = &out.c_n {
        assert_close(&format!("{at}: c_n"), &c_n.to_vec()?, f.get(&format!("{case}.c_n")), TOL);
        loss = loss.add(&c_n.mul(&f.tensor(&format!("{case}.wc"), device)?)?.sum_all()?)?;
    }
    assert_close(&format!("{at}: loss"), &loss.to_vec()?, f.get(&format!("{case}.loss")), TOL);
    let grads = loss.backward()?;
    for (name, leaf) in names.iter().zip(&leaves) {
        let got = grads.get(leaf).unwrap_or_else(|| panic!("{at}: no gradient for {name}")).to_vec()?;
        assert_close(&format!("{at}: gradient of {name}"), &got, f.get(&format!("{case}.grad.{name}")), GRAD_TOL);
    }
    Ok(())
}

/// The two-layer bidirectional cases through the layers, PyTorch's weights loaded by name:
/// the output, the last state and the gradients of the input and every parameter.
fn check_layer(f: &TorchFixture, case: &str, device: &Device) -> Result<()> {
    let config = RecurrentConfig { layers: 2, bidirectional: true, dropout: 0.0, return_sequences: true };
    let build = |config: RecurrentConfig| -> Result<Box<dyn Module>> {
        let layer: Box<dyn Module> = if case.starts_with("lstm") {
            Box::new(Lstm::new(device, 3, 4, config, 0)?)
        } else {
            Box::new(Gru::new(device, 3, 4, config, 0)?)
        };
        for (name, p) in named_parameters(layer.as_ref()) {
            p.assign(&f.tensor(&format!("{case}.{name}"), device)?)?;
        }
        Ok(layer)
    };
    let layer = build(config)?;
    let at = format!("{case} on {device}");
    let x = f.tensor(&format!("{case}.input"), device)?.requires_grad_()?;
    let y = layer.forward_raw(&x)?;
    assert_close(&format!("{at}: y"), &y.to_vec()?, f.get(&format!("{case}.y")), TOL);
    let last = build(RecurrentConfig { return_sequences: false, ..config })?.forward_raw(&x)?;
    assert_close(&format!("{at}: last state"), &last.to_vec()?, f.get(&format!("{case}.last")), TOL);
    let loss = y.mul(&f.tensor(&format!("{case}.wy"), device)?)?.sum_all()?;
    assert_close(&format!("{at}: loss"), &loss.to_vec()?, f.get(&format!("{case}.loss")), TOL);
    let grads = loss.backward()?;
    let dx = grads.get(&x).expect("the input's gradient").to_vec()?;
    assert_close(&format!("{at}: gradient of the input"), &dx, f.get(&format!("{case}.grad.input")), GRAD_TOL);
    let params = named_parameters(layer.as_ref());
    assert_eq!(params.len(), 16);
    for (name, p) in params {
        let got = grads.get(p.tensor()).unwrap_or_else(|| panic!("{at}: no gradient for {name}")).to_vec()?;
        assert_close(&format!("{at}: gradient of {name}"), &got, f.get(&format!("{case}.grad.{name}")), GRAD_TOL);
    }
    Ok(())
}

/// The generated models, PyTorch's weights loaded under their names (`rnn.0.weight_ih_l0` ...).
fn check_generated(f: &TorchFixture, device: &Device) -> Result<()> {
    let load = |model: &dyn Module, case: &str| -> Result<()> {
        for (name, p) in named_parameters(model) {
            let torch_name = name.strip_prefix("rnn.0.").expect("parameters of the rnn field");
            p.assign(&f.tensor(&format!("{case}.{torch_name}"), device)?)?;
        }
        Ok(())
    };
    let lstm = BiLstm::new(device, 1)?;
    load(&lstm, "lstm_bi2")?;
    assert_eq!(BiLstm::TRAINABLE_PARAMS, rumus::nn::count_trainable(&lstm));
    let y = lstm.forward_raw(&f.tensor("lstm_bi2.input", device)?)?;
    assert_close(&format!("generated BiLstm on {device}"), &y.to_vec()?, f.get("lstm_bi2.y"), TOL);
    let mut gru = BiGruLast::new(device, 1)?;
    gru.eval();
    load(&gru, "gru_bi2")?;
    let x = Tensor::<Shape2<5, 3>>::from_raw(f.tensor("gru_bi2.input", device)?)?;
    let last: Tensor<Shape1<8>> = gru.forward(&x)?;
    assert_close(&format!("generated BiGruLast on {device}"), &last.raw().to_vec()?, f.get("gru_bi2.last"), TOL);
    Ok(())
}

fn check_all(device: &Device) -> Result<()> {
    let f = TorchFixture::load("torch_rnn.safetensors");
    check_op(&f, "lstm", device)?;
    check_op(&f, "gru", device)?;
    check_layer(&f, "lstm_bi2", device)?;
    check_layer(&f, "gru_bi2", device)?;
    check_generated(&f, device)
}

#[test]
fn pytorch_lstm_and_gru_match_on_the_cpu() -> Result<()> {
    check_all(&Device::cpu())
}

#[test]
fn pytorch_lstm_and_gru_match_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_all(&gpu)
}
