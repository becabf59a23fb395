//! A backward pass frees each node's saved tensors as it goes (like PyTorch), so once it returns
//! only the gradients and the loss itself remain on the device.

use std::sync::Arc;

use rumus::backend::wgpu::WgpuBackend;
use rumus::testing::wgpu_or_skip;
use rumus::{Device, RawTensor, Result};

#[test]
fn backward_frees_the_saved_tensors_of_the_graph() -> Result<()> {
    if wgpu_or_skip().is_none() {
        return Ok(());
    }
    // A backend of its own on the shared device: its pool counts only this test's buffers, not
    // those of the start-up warm-up threads that run on hardware adapters.
    let backend = Arc::new(WgpuBackend::with_shared_memory_reductions()?);
    let device = Device::Wgpu(backend.clone());
    let live = || backend.pool_stats().live_bytes;

    let x = RawTensor::randn(&[8, 3, 16, 16], 0.0, 1.0, 1, &device)?;
    let targets = RawTensor::from_indices(&[0, 1, 2, 3, 4, 5, 6, 7], &[8], &device)?;
    let weight = RawTensor::randn(&[4, 3, 3, 3], 0.0, 0.1, 2, &device)?.requires_grad_()?;
    let bias = RawTensor::zeros(&[4], &device)?.requires_grad_()?;
    let fc = RawTensor::randn(&[4 * 8 * 8, 10], 0.0, 0.1, 3, &device)?.requires_grad_()?;
    let start = live();

    let hidden = x.conv2d(&weight, Some(&bias), (1, 1), (1, 1), (1, 1), 1)?.relu()?;
    let pooled = hidden.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))?;
    let loss = pooled.reshape(&[8, 4 * 8 * 8])?.matmul(&fc)?.cross_entropy(&targets, 0.0)?;
    drop((hidden, pooled));
    // The graph holds the activations: at least the conv output [8, 4, 16, 16].
    let after_forward = live();
    assert!(after_forward - start >= 8 * 4 * 16 * 16 * 4, "{start} -> {after_forward}");

    let grads = loss.backward()?;
    assert_eq!(grads.len(), 3);
    let after_backward = live();
    // The graph's saved tensors are gone: dropping the loss frees only its own (smallest) buffer.
    drop(loss);
    let freed_by_loss = after_backward - live();
    assert!(freed_by_loss <= 256, "dropping the loss freed {freed_by_loss} bytes of saved tensors");
    // What remains are the gradients.
    drop(grads);
    assert_eq!(live(), start);
    Ok(())
}
