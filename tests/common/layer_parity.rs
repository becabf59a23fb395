//! One layer run on the CPU and on wgpu from the same weights, on a strided input view, and
//! its output and gradients compared.

use rumus::nn::Module;
use rumus::testing::assert_close;
use rumus::{Device, RawTensor, Result};

/// Builds the layer under test on a device.
pub type Build = Box<dyn Fn(&Device) -> Result<Box<dyn Module>>>;

/// One layer's output, input gradient, trainable parameters' gradients and buffers (after the
/// forward: a batch norm's running statistics) on one device.
type Run = (Vec<f32>, Vec<f32>, Vec<Vec<f32>>, Vec<Vec<f32>>);

/// Runs `build`'s layer on `cpu` and on `gpu` and asserts that the output, the input gradient,
/// every trainable parameter's gradient and every buffer (running statistics, after the
/// forward) agree within 1e-4. `stored` is the input with its last two axes swapped; the layer
/// sees it transposed back, a strided view. With `param_seed`, every trainable parameter is
/// first set to random values drawn from it (the same on both devices). Returns the CPU's
/// gradients of the trainable parameters (buffers take none).
pub fn assert_layer_parity(
    name: &str,
    stored: &RawTensor,
    build: &Build,
    param_seed: Option<u64>,
    (cpu, gpu): (&Device, &Device),
) -> Result<Vec<Vec<f32>>> {
    let run = |device: &Device| -> Result<Run> {
        let layer = build(device)?;
        if let Some(mut seed) = param_seed {
            layer.visit_params("", &mut |_, p| {
                if !p.is_trainable() {
                    return;
                }
                seed += 1;
                let value = RawTensor::randn(p.tensor().shape(), 1.0, 0.5, seed, &Device::cpu()).expect("randn");
                p.assign(&value.to_device(device).expect("to_device")).expect("assign");
            });
        }
        let x = stored.to_device(device)?.requires_grad_()?;
        let y = layer.forward_raw(&x.transpose(-1, -2)?)?;
        let weights = RawTensor::rand_uniform(y.shape(), 0.5, 1.5, 7, &Device::cpu())?.to_device(device)?;
        let grads = y.mul(&weights)?.sum_all()?.backward()?;
        let (mut params, mut buffers) = (Vec::new(), Vec::new());
        layer.visit_params("", &mut |_, p| {
            if p.is_trainable() {
                params.push(p.tensor().clone())
            } else {
                buffers.push(p.tensor().clone())
            }
        });
        let gp = params.iter().map(|p| grads.get(p).expect("parameter gradient").to_vec()).collect::<Result<_>>()?;
        let buffers = buffers.iter().map(|b| b.to_vec()).collect::<Result<Vec<_>>>()?;
        Ok((y.contiguous()?.to_vec()?, grads.get(&x).expect("input gradient").to_vec()?, gp, buffers))
    };
    let (a, b) = (run(cpu)?, run(gpu)?);
    for (k, (ba, bb)) in a.3.iter().zip(&b.3).enumerate() {
        assert_close(&format!("{name} buffer {k} after the forward, cpu vs wgpu"), bb, ba, 1e-4);
    }
    assert_close(&format!("{name} output, cpu vs wgpu"), &b.0, &a.0, 1e-4);
    assert_close(&format!("{name} input gradient, cpu vs wgpu"), &b.1, &a.1, 1e-4);
    for (k, (pa, pb)) in a.2.iter().zip(&b.2).enumerate() {
        assert_close(&format!("{name} parameter {k} gradient, cpu vs wgpu"), pb, pa, 1e-4);
    }
    Ok(a.2)
}
