//! Interchange with PyTorch: nn.GroupNorm, nn.InstanceNorm2d and nn.RMSNorm with random weights,
//! their input, outputs and the gradients of a fixed loss, made by PyTorch in float64
//! (`tests/fixtures/make_norm_fixture.py`). rumus's layers, given PyTorch's weights by name, and
//! the models `#[model]` generates must give PyTorch's numbers on the CPU and on wgpu.

use crate::common::torch_fixture::TorchFixture;
use rumus::nn::{named_parameters, GroupNorm, InstanceNorm2d, Module, RmsNorm};
use rumus::prelude::*;
use rumus::testing::{assert_close, wgpu_or_skip};

/// The fixture's `group_chw` layer as the macro generates it.
#[model(input = [8, 3, 5])]
pub struct GroupNet {
    norm: layers![GroupNorm(4)],
}

/// The fixture's `rms` layer as the macro generates it (rumus's default eps, 1e-6).
#[model(input = [5, 16])]
pub struct RmsNet {
    norm: layers![RmsNorm],
}

/// The fixture's `instance` layer as the macro generates it (no parameters).
#[model(input = [4, 5, 6])]
pub struct InstanceNet {
    norm: layers![InstanceNorm2d],
}

const TOL: f32 = 2e-5;
const GRAD_TOL: f32 = 1e-4;

/// One case: the layer given PyTorch's weights by name, its output, the loss and the gradients
/// of the input and every parameter.
fn check_layer(f: &TorchFixture, case: &str, layer: &dyn Module, params: usize, device: &Device) -> Result<()> {
    let at = format!("{case} on {device}");
    let named = named_parameters(layer);
    assert_eq!(named.len(), params, "{at}: parameters");
    for (name, p) in &named {
        p.assign(&f.tensor(&format!("{case}.{name}"), device)?)?;
    }
    let x = f.tensor(&format!("{case}.input"), device)?.requires_grad_()?;
    let y = layer.forward_raw(&x)?;
    assert_close(&format!("{at}: y"), &y.to_vec()?, f.get(&format!("{case}.y")), TOL);
    let loss = y.mul(&f.tensor(&format!("{case}.wy"), device)?)?.sum_all()?;
    assert_close(&format!("{at}: loss"), &loss.to_vec()?, f.get(&format!("{case}.loss")), TOL);
    let grads = loss.backward()?;
    let dx = grads.get(&x).expect("the input's gradient").to_vec()?;
    assert_close(&format!("{at}: gradient of the input"), &dx, f.get(&format!("{case}.grad.input")), GRAD_TOL);
    for (name, p) in named {
        let got = grads.get(p.tensor()).unwrap_or_else(|| panic!("{at}: no gradient for {name}")).to_vec()?;
        assert_close(&format!("{at}: gradient of {name}"), &got, f.get(&format!("{case}.grad.{name}")), GRAD_TOL);
    }
    Ok(())
}

/// The generated models, PyTorch's weights loaded under their names (`norm.0.weight` ...).
fn check_generated(f: &TorchFixture, device: &Device) -> Result<()> {
    let load = |model: &dyn Module, case: &str| -> Result<()> {
        for (name, p) in named_parameters(model) {
            let torch_name = name.strip_prefix("norm.0.").expect("parameters of the norm field");
            p.assign(&f.tensor(&format!("{case}.{torch_name}"), device)?)?;
        }
        Ok(())
    };
    let group = GroupNet::new(device, 1)?;
    load(&group, "group_chw")?;
    assert_eq!(GroupNet::TRAINABLE_PARAMS, 16);
    let y = group.forward_raw(&f.tensor("group_chw.input", device)?)?;
    assert_close(&format!("generated GroupNet on {device}"), &y.to_vec()?, f.get("group_chw.y"), TOL);
    let rms = RmsNet::new(device, 1)?;
    load(&rms, "rms")?;
    assert_eq!(RmsNet::TRAINABLE_PARAMS, 16);
    let x = Tensor::<Shape2<5, 16>>::from_raw(f.tensor("rms.input", device)?)?;
    let y: Tensor<Shape2<5, 16>> = rms.forward(&x)?;
    assert_close(&format!("generated RmsNet on {device}"), &y.raw().to_vec()?, f.get("rms.y"), TOL);
    let inst = InstanceNet::new(device, 1)?;
    assert_eq!(InstanceNet::TRAINABLE_PARAMS, 0);
    let y = inst.forward_raw(&f.tensor("instance.input", device)?)?;
    assert_close(&format!("generated InstanceNet on {device}"), &y.to_vec()?, f.get("instance.y"), TOL);
    Ok(())
}

fn check_all(device: &Device) -> Result<()> {
    let f = TorchFixture::load("torch_norms.safetensors");
    check_layer(&f, "group_chw", &GroupNorm::new(device, 4, 8, 1e-5, true)?, 2, device)?;
    check_layer(&f, "group_cl", &GroupNorm::new(device, 2, 6, 1e-3, true)?, 2, device)?;
    check_layer(&f, "instance", &InstanceNorm2d::new(device, 4, 1e-5, false)?, 0, device)?;
    check_layer(&f, "instance_affine", &InstanceNorm2d::new(device, 4, 1e-5, true)?, 2, device)?;
    check_layer(&f, "rms", &RmsNorm::new(device, &[16], 1e-6, true)?, 1, device)?;
    check_layer(&f, "rms_2d", &RmsNorm::new(device, &[4, 6], f32::EPSILON, true)?, 1, device)?;
    check_layer(&f, "rms_plain", &RmsNorm::new(device, &[8], 1e-6, false)?, 0, device)?;
    check_generated(&f, device)
}

#[test]
fn pytorch_norms_match_on_the_cpu() -> Result<()> {
    check_all(&Device::cpu())
}

#[test]
fn pytorch_norms_match_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_all(&gpu)
}
