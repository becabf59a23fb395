//! Interchange with PyTorch (issue #29): a tiny GPT of examples/shakespeare.rs's architecture,
//! its weights, input ids, logits, loss and every gradient made by PyTorch in float64
//! (`tests/fixtures/make_gpt_fixture.py`, the module of `tools/bench/torch_gpt.py`). rumus loads the
//! weights by their names and must give PyTorch's numbers on the CPU and on wgpu.

use std::collections::HashMap;
use std::path::Path;

use rumus::nn::{named_params, Module};
use rumus::prelude::*;
use rumus::testing::assert_close;

/// tools/bench/torch_gpt.py's `Gpt(vocab=11, block=16, embed=8, heads=2, layers=2, dropout=0.0)`.
#[model(input = [16])]
pub struct TinyGpt {
    embed: layers![Embedding(11, 8, std = 0.02), PositionalEmbedding(16)],
    blocks: layers![Repeat(2, TransformerBlock(2))],
    head: layers![LayerNorm, Linear(11, bias = false, tie = embed.0)],
}

struct Fixture {
    shapes: HashMap<String, Vec<usize>>,
    floats: HashMap<String, Vec<f32>>,
    ids: HashMap<String, Vec<u32>>,
}

fn fixture() -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_gpt_io.safetensors");
    let bytes = std::fs::read(&path).expect("tests/fixtures/torch_gpt_io.safetensors (make_gpt_fixture.py)");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
    let mut out = Fixture { shapes: HashMap::new(), floats: HashMap::new(), ids: HashMap::new() };
    for (name, t) in file.tensors() {
        out.shapes.insert(name.clone(), t.shape().to_vec());
        match t.dtype() {
            safetensors::Dtype::F32 => {
                let v = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                out.floats.insert(name, v);
            }
            safetensors::Dtype::I64 => {
                let v = t
                    .data()
                    .chunks_exact(8)
                    .map(|c| u32::try_from(i64::from_le_bytes(c.try_into().unwrap())).unwrap())
                    .collect();
                out.ids.insert(name, v);
            }
            other => panic!("{name}: unexpected dtype {other:?}"),
        }
    }
    out
}

/// Loads PyTorch's weights into a fresh model on `device` and checks logits, loss and the
/// gradient of every named tensor (the tied weight's under both of its names).
fn check_on(device: &Device) -> Result<()> {
    let weights = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_gpt.safetensors");
    let mut model = TinyGpt::new(device, 99)?;
    model.load(&weights)?;
    let f = fixture();
    let x = RawTensor::from_indices(&f.ids["input"], &f.shapes["input"], device)?;
    let y = RawTensor::from_indices(&f.ids["target"], &[32], device)?;
    model.train();
    let logits = model.forward_raw(&x)?;
    assert_eq!(logits.shape(), [2, 16, 11]);
    assert_close(&format!("logits on {device}"), &logits.to_vec()?, &f.floats["logits"], 2e-5);
    let loss = logits.reshape(&[32, 11])?.cross_entropy(&y, 0.0)?;
    assert_close(&format!("loss on {device}"), &loss.to_vec()?, &f.floats["loss"], 2e-5);
    let grads = loss.backward()?;
    let params = named_params(&model);
    assert_eq!(params.len(), f.floats.keys().filter(|k| k.starts_with("grad.")).count());
    for (name, param) in params {
        let got = grads.get(param.tensor()).unwrap_or_else(|| panic!("no gradient for {name}")).to_vec()?;
        assert_close(&format!("gradient of {name} on {device}"), &got, &f.floats[&format!("grad.{name}")], 1e-4);
    }
    Ok(())
}

#[test]
fn pytorch_gpt_weights_give_pytorchs_logits_loss_and_gradients_on_the_cpu() -> Result<()> {
    check_on(&Device::cpu())
}

#[test]
fn pytorch_gpt_weights_give_pytorchs_logits_loss_and_gradients_on_wgpu() -> Result<()> {
    let Some(device) = rumus::testing::wgpu_or_skip() else { return Ok(()) };
    check_on(&device)
}

/// The checkpoint rumus writes has PyTorch's names and shapes: PyTorch's `load_state_dict`
/// reads it back (both names of the tied weight present, as in PyTorch's state dict).
#[test]
fn saved_gpt_checkpoints_use_the_fixtures_names_and_shapes() -> Result<()> {
    let model = TinyGpt::new(&Device::cpu(), 5)?;
    let dir = std::env::temp_dir().join(format!("rumus-gpt-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    model.save(dir.join("gpt.safetensors"))?;
    let names = |path: &Path| -> Vec<(String, Vec<usize>)> {
        let bytes = std::fs::read(path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut v: Vec<_> = file.tensors().into_iter().map(|(n, t)| (n, t.shape().to_vec())).collect();
        v.sort();
        v
    };
    let torch = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_gpt.safetensors");
    assert_eq!(names(&dir.join("gpt.safetensors")), names(&torch));
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}
