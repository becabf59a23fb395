//! `WgpuBackend::profile_kernels`: every dispatch of the profiled work is counted under its
//! kernel and size, also past one encoder's worth of dispatches; the work's results are those of
//! an unprofiled run, and recording goes back to shared passes afterwards. On a backend of its
//! own: the shared one records other tests' kernels at the same time, which a profile of it
//! would count too.

use std::sync::Arc;

use rumus::backend::wgpu::WgpuBackend;
use rumus::testing::wgpu_or_skip;
use rumus::{Device, RawTensor, Result};

/// More dispatches than one encoder holds before it is submitted (256).
const ADDS: usize = 300;

fn chain(x: &RawTensor, y: &RawTensor) -> Result<RawTensor> {
    let mut acc = x.clone();
    for _ in 0..ADDS {
        acc = acc.add(y)?;
    }
    acc.matmul(&y.reshape(&[7, 1])?)
}

#[test]
fn a_profile_counts_every_dispatch_by_kernel_and_size() -> Result<()> {
    if wgpu_or_skip().is_none() {
        return Ok(());
    }
    let backend = Arc::new(WgpuBackend::independent()?);
    let device = Device::Wgpu(backend.clone());
    let x = RawTensor::from_vec((0..21).map(|i| i as f32 * 0.5).collect(), &[3, 7], &device)?;
    let y = RawTensor::from_vec((0..7).map(|i| 1.0 - i as f32 * 0.25).collect(), &[1, 7], &device)?;
    let expected = chain(&x, &y)?.to_vec()?;
    if !backend.context().has_timestamps() {
        let err = backend.profile_kernels(|| chain(&x, &y).map(drop)).unwrap_err();
        assert!(err.to_string().contains("timestamp"), "{err}");
        return Ok(());
    }
    let mut out = None;
    let times = backend.profile_kernels(|| {
        out = Some(chain(&x, &y)?);
        Ok(())
    })?;
    let out = out.expect("the work ran").to_vec()?;
    assert_eq!(out, expected, "profiling changed the results");
    let calls = |shader: &str| times.iter().filter(|t| t.shader == shader).map(|t| t.calls).sum::<u64>();
    assert_eq!(calls("binary"), ADDS as u64, "{times:?}");
    assert!(calls("matmul") >= 1, "{times:?}");
    assert!(times.iter().all(|t| t.seconds >= 0.0 && t.groups.iter().all(|&g| g > 0)), "{times:?}");
    assert!(times.windows(2).all(|w| w[0].seconds >= w[1].seconds), "not longest first: {times:?}");
    // Profiling is off again: the same work still gives the same values.
    assert_eq!(chain(&x, &y)?.to_vec()?, expected);
    Ok(())
}
