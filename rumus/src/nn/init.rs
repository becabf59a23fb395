//! Seeded parameter initialisation. Values are generated on the host with the counter-based RNG
//! and then moved, so a seed gives the same model on every device.

use super::Param;
use crate::{Device, RawTensor, Result};

/// Uniform in `[-bound, bound)`.
pub fn uniform(shape: &[usize], bound: f32, seed: u64, device: &Device) -> Result<RawTensor> {
    RawTensor::rand_uniform(shape, -bound, bound, seed, &Device::cpu())?.to_device(device)
}

/// Normal with standard deviation `std`.
pub fn normal(shape: &[usize], std: f32, seed: u64, device: &Device) -> Result<RawTensor> {
    RawTensor::randn(shape, 0.0, std, seed, &Device::cpu())?.to_device(device)
}

/// Kaiming-uniform as PyTorch initialises conv and linear weights (`a = sqrt(5)`), which
/// reduces to `±1/sqrt(fan_in)`.
pub fn kaiming_uniform_default(shape: &[usize], fan_in: usize, seed: u64, device: &Device) -> Result<RawTensor> {
    uniform(shape, 1.0 / (fan_in.max(1) as f32).sqrt(), seed, device)
}

/// Xavier/Glorot uniform: `±sqrt(6 / (fan_in + fan_out))`.
pub fn xavier_uniform(shape: &[usize], fan_in: usize, fan_out: usize, seed: u64, device: &Device) -> Result<RawTensor> {
    uniform(shape, (6.0 / (fan_in + fan_out).max(1) as f32).sqrt(), seed, device)
}

/// PyTorch's default parameters of a convolution (plain, 1-D or transposed): the weight of
/// `weight_shape` kaiming-uniform from `seed`, and when `bias` is set a bias `[out_channels]`
/// uniform in the same `±1/sqrt(fan_in)` from `seed + 1`.
pub(crate) fn conv_parameters(
    device: &Device,
    weight_shape: &[usize],
    fan_in: usize,
    out_channels: usize,
    bias: bool,
    seed: u64,
) -> Result<(Param, Option<Param>)> {
    let weight = Param::new(kaiming_uniform_default(weight_shape, fan_in, seed, device)?)?;
    let bias = if bias {
        let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
        Some(Param::new(uniform(&[out_channels], bound, seed.wrapping_add(1), device)?)?)
    } else {
        None
    };
    Ok((weight, bias))
}
