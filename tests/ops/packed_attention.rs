//! `RawTensor::packed_attention`: multi-head self-attention read in place from a packed
//! `[n, t, 3·heads·d]` projection (`AttentionLayout::Packed`), against the composition it
//! replaces (`split_heads`, `scaled_dot_product_attention`, `merge_heads`): values and the
//! projection's gradient on CPU and wgpu over random shapes (heads, head sizes that are not
//! multiples of 4, sequences across the kernels' 64-row tiles, causal and not), finite
//! differences, CPU ↔ wgpu parity, and bad input.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::{AttentionArgs, AttentionLayout};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, RawTensor, Result};

/// One packed problem: sequences, positions, heads, head size, causal.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    t: usize,
    heads: usize,
    d: usize,
    causal: bool,
}

impl Case {
    fn shape(&self) -> [usize; 3] {
        [self.n, self.t, 3 * self.heads * self.d]
    }
}

/// Random cases from `seed`: every size small enough for lavapipe, some past a 64-row tile.
fn cases(seed: u64, count: usize) -> Vec<Case> {
    let mut rng = rumus::rng::Rng::new(seed);
    let mut pick = |choices: &[usize]| choices[(rng.uniform() * choices.len() as f32) as usize % choices.len()];
    (0..count)
        .map(|i| Case {
            n: pick(&[1, 2, 3]),
            t: pick(&[1, 2, 5, 17, 64, 70]),
            heads: pick(&[1, 2, 3]),
            d: pick(&[1, 3, 4, 6, 8, 16, 33, 64]),
            causal: i % 3 != 0,
        })
        .collect()
}

/// The output and the projection's gradient (of a weighted sum of the output), fused or composed.
fn run(device: &Device, c: &Case, fused: bool, seed: u64) -> Result<(Vec<f32>, Vec<f32>)> {
    let qkv = RawTensor::randn(&c.shape(), 0.0, 1.0, seed, device)?.requires_grad_()?;
    let out = if fused {
        qkv.packed_attention(c.heads, c.causal)?
    } else {
        let [q, k, v] = qkv.split_heads(c.heads)?;
        q.scaled_dot_product_attention(&k, &v, c.causal)?.merge_heads()?
    };
    assert_eq!(out.shape(), &[c.n, c.t, c.heads * c.d]);
    let weights = RawTensor::rand_uniform(out.shape(), 0.5, 1.5, seed + 1, device)?;
    let grads = out.mul(&weights)?.sum_all()?.backward()?;
    Ok((out.to_vec()?, grads.get(&qkv).expect("a gradient").to_vec()?))
}

fn check(device: &Device, cases: &[Case]) {
    for (i, c) in cases.iter().enumerate() {
        let (out, grad) = run(device, c, true, i as u64).unwrap();
        let (want, want_grad) = run(device, c, false, i as u64).unwrap();
        assert_close(&format!("{c:?} on {device}: output"), &out, &want, 1e-4);
        assert_close(&format!("{c:?} on {device}: projection's gradient"), &grad, &want_grad, 1e-4);
        assert!(grad.iter().any(|&g| g != 0.0), "{c:?}: an all-zero gradient proves nothing");
    }
}

#[test]
fn packed_attention_matches_the_composition_on_cpu() {
    check(&Device::cpu(), &cases(1, 24));
}

#[test]
fn packed_attention_matches_the_composition_on_wgpu() {
    let Some(device) = wgpu_or_skip() else { return };
    check(&device, &cases(2, 16));
}

/// A head size above the wgpu kernels' 128 runs the composition on the device.
#[test]
fn wide_packed_heads_use_the_composition() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        check(&device, &[Case { n: 1, t: 3, heads: 2, d: 136, causal: true }]);
    }
}

#[test]
fn packed_gradients_match_finite_differences() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        for c in [Case { n: 2, t: 3, heads: 2, d: 2, causal: true }, Case { n: 1, t: 4, heads: 3, d: 1, causal: false }]
        {
            let x = RawTensor::randn(&c.shape(), 0.0, 1.0, 5, &device).unwrap();
            let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
            grad_check(&[x], settings, |t| t[0].packed_attention(c.heads, c.causal))
                .unwrap_or_else(|e| panic!("{c:?} on {device}: {e}"));
        }
    }
}

#[test]
fn cpu_and_wgpu_agree_on_packed_heads() {
    let Some(device) = wgpu_or_skip() else { return };
    for (i, c) in cases(3, 6).iter().enumerate() {
        let (out, grad) = run(&Device::cpu(), c, true, i as u64).unwrap();
        let (gpu_out, gpu_grad) = run(&device, c, true, i as u64).unwrap();
        assert_close(&format!("{c:?}: output"), &gpu_out, &out, 1e-4);
        assert_close(&format!("{c:?}: gradient"), &gpu_grad, &grad, 1e-4);
    }
}

/// A view (a slice of a wider projection) is read as its values, not its storage.
#[test]
fn a_sliced_projection_is_read_as_its_values() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let wide = RawTensor::randn(&[2, 5, 30], 0.0, 1.0, 9, &device).unwrap();
        let view = wide.narrow(-1, 3, 27).unwrap();
        let out = view.packed_attention(2, true).unwrap();
        let want = view.contiguous().unwrap().packed_attention(2, true).unwrap();
        assert_close(&format!("slice on {device}"), &out.to_vec().unwrap(), &want.to_vec().unwrap(), 0.0);
    }
}

#[test]
fn bad_packed_input_is_an_error() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let t = |shape: &[usize]| RawTensor::zeros(shape, &device).unwrap();
        let shape_error = |r: Result<RawTensor>| matches!(r, Err(rumus::Error::Shape { .. }));
        assert!(shape_error(t(&[2, 4, 12]).packed_attention(0, true)), "no heads");
        assert!(shape_error(t(&[2, 4, 12]).packed_attention(3, true)), "12 is not 3·3·d");
        assert!(shape_error(t(&[2, 4, 12]).packed_attention(usize::MAX / 2, true)), "3·heads overflows");
        assert!(shape_error(t(&[4, 12]).packed_attention(2, true)), "rank 2");
        assert!(shape_error(t(&[1, 2, 4, 12]).packed_attention(2, true)), "rank 4");
        assert!(matches!(t(&[2, 4, 12]).split_heads(5), Err(rumus::Error::Shape { .. })), "split into 5");
        assert!(shape_error(t(&[2, 4, 12]).merge_heads()), "merge a rank-3 tensor");
        // Empty axes follow the composition.
        assert_eq!(t(&[0, 4, 12]).packed_attention(2, true).unwrap().shape(), &[0, 4, 4]);
        assert_eq!(t(&[2, 0, 12]).packed_attention(2, true).unwrap().shape(), &[2, 0, 4]);
        // A backend refuses a packed layout its buffer does not hold.
        let args = AttentionArgs {
            batch: 4,
            tq: 3,
            tk: 3,
            d: 2,
            scale: 0.5,
            causal: true,
            layout: AttentionLayout::Packed { heads: 2 },
        };
        let b = device.backend();
        let short = b.from_f32(&vec![0.0; 4 * 3 * 3 * 2 - 1]).unwrap();
        assert!(b.attention_forward(&short, &short, &short, &args).is_err(), "{device}: forward");
        let (full, lse) = (b.from_f32(&[0.0; 4 * 3 * 3 * 2]).unwrap(), b.from_f32(&[0.0; 12]).unwrap());
        let out = b.from_f32(&[0.0; 4 * 3 * 2]).unwrap();
        let short_out = b.from_f32(&[0.0; 4 * 3 * 2 - 1]).unwrap();
        assert!(b.attention_backward(&full, &full, &full, &out, &lse, &short_out, &args).is_err(), "{device}: dout");
        assert!(b.attention_backward(&full, &full, &full, &short_out, &lse, &out, &args).is_err(), "{device}: out");
        assert!(b.attention_backward(&short, &short, &short, &out, &lse, &out, &args).is_err(), "{device}: inputs");
        assert!(
            b.attention_backward(&full, &full, &full, &out, &lse, &out, &args).is_ok(),
            "{device}: the right sizes"
        );
    }
}
