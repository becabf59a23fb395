//! Data augmentation (`rumus::data::transforms`): seeded and reproducible per epoch and sample
//! position (whatever the batch size),
//! crops and flips move whole pixels, the pipeline on wgpu as on the CPU, the loader and `fit`
//! applying it to training batches, and bad parameters as errors (property-based).

use proptest::prelude::*;
use rumus::data::transforms::{Augment, RandomAffine};
use rumus::data::{ClassDataset, DataLoader};
use rumus::prelude::*;
use rumus::testing::{assert_close, wgpu_or_skip};

use crate::common::SmallCnn;

fn images(n: usize, c: usize, side: usize, device: &Device) -> RawTensor {
    RawTensor::rand_uniform(&[n, c, side, side], 0.1, 1.0, 11, device).expect("rand_uniform")
}

#[test]
fn draws_depend_only_on_seed_epoch_and_sample_position() -> Result<()> {
    let cpu = Device::cpu();
    let x = images(4, 2, 6, &cpu);
    let aug = Augment::new(3).random_crop(2)?.horizontal_flip(0.5)?;
    let run = |a: &Augment, epoch, first| a.apply(&x, epoch, first).and_then(|y| y.to_vec());
    assert_eq!(run(&aug, 0, 0)?, run(&aug.clone(), 0, 0)?);
    // A sample's transform is its position's, whichever batch holds it: the batch of 4 at
    // positions 8..12 is its halves at 8..10 and 10..12 (two ranks' slices of one global batch).
    let halves = [x.narrow(0, 0, 2)?, x.narrow(0, 2, 4)?];
    let mut split = aug.apply(&halves[0].contiguous()?, 1, 8)?.to_vec()?;
    split.extend(aug.apply(&halves[1].contiguous()?, 1, 10)?.to_vec()?);
    assert_eq!(run(&aug, 1, 8)?, split);
    for (what, other) in [
        ("epoch", run(&aug, 1, 0)?),
        ("position", run(&aug, 0, 4)?),
        ("seed", run(&Augment::new(4).random_crop(2)?.horizontal_flip(0.5)?, 0, 0)?),
    ] {
        assert_ne!(run(&aug, 0, 0)?, other, "another {what} draws anew");
    }
    // An empty pipeline is the identity, on any shape.
    let flat = RawTensor::ones(&[3, 5], &cpu)?;
    assert_eq!(Augment::new(1).apply(&flat, 0, 0)?.to_vec()?, flat.to_vec()?);
    assert!(matches!(Augment::new(1).random_crop(1)?.apply(&flat, 0, 0), Err(Error::Shape { .. })));
    Ok(())
}

/// Every augmented sample is its source shifted by at most `p` pixels per axis, maybe mirrored,
/// with zeros shifted in: found by trying every candidate.
#[test]
fn crops_and_flips_move_whole_pixels() -> Result<()> {
    let cpu = Device::cpu();
    let (n, c, side, p) = (8, 2, 5, 2i64);
    let x = images(n, c, side, &cpu);
    let host = x.to_vec()?;
    let y = Augment::new(9).random_crop(p as usize)?.horizontal_flip(0.5)?.apply(&x, 2, 5)?.to_vec()?;
    let plane = side * side;
    let (mut flips, mut shifts) = (0, 0);
    for i in 0..n {
        let sample = &y[i * c * plane..(i + 1) * c * plane];
        let candidate = |dx: i64, dy: i64, flip: bool| -> Vec<f32> {
            let mut out = Vec::new();
            for ch in 0..c {
                for r in 0..side as i64 {
                    for col in 0..side as i64 {
                        let (sx, sy) = (if flip { side as i64 - 1 - col } else { col } + dx, r + dy);
                        let inside = (0..side as i64).contains(&sx) && (0..side as i64).contains(&sy);
                        let at = (i * c + ch) * plane + sy.max(0) as usize * side + sx.max(0) as usize;
                        out.push(if inside { host[at] } else { 0.0 });
                    }
                }
            }
            out
        };
        let found = (-p..=p)
            .flat_map(|dx| (-p..=p).flat_map(move |dy| [false, true].map(|f| (dx, dy, f))))
            .find(|&(dx, dy, f)| candidate(dx, dy, f) == sample);
        // The flip is applied after the crop, so a flipped sample reads a mirrored shift.
        let (dx, dy, flip) = found.unwrap_or_else(|| panic!("sample {i} is no shift or mirror of its source"));
        flips += flip as usize;
        shifts += (dx != 0 || dy != 0) as usize;
    }
    assert!(flips > 0 && flips < n && shifts > 0, "{flips} flips and {shifts} shifts of {n}");
    Ok(())
}

#[test]
fn normalize_and_the_identity_affine_are_exact() -> Result<()> {
    let cpu = Device::cpu();
    let x = images(2, 3, 4, &cpu);
    let (mean, std) = ([0.5, 0.25, 0.0], [2.0, 0.5, 1.0]);
    let y = Augment::new(0).normalize(&mean, &std)?.apply(&x, 0, 0)?.to_vec()?;
    let want: Vec<f32> =
        x.to_vec()?.iter().enumerate().map(|(k, v)| (v - mean[(k / 16) % 3]) / std[(k / 16) % 3]).collect();
    assert_eq!(y, want);
    let same = Augment::new(0).random_affine(RandomAffine::default())?.apply(&x, 0, 0)?.to_vec()?;
    assert_eq!(same, x.to_vec()?, "the identity affine map, read bilinearly, changes nothing");
    // Normalize names the channel count it expects.
    let two = Augment::new(0).normalize(&[0.0, 0.0], &[1.0, 1.0])?;
    assert!(matches!(two.apply(&x, 0, 0), Err(Error::Shape { op: "Normalize", .. })));
    Ok(())
}

#[test]
fn the_pipeline_runs_on_wgpu_as_on_the_cpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    let x = images(5, 3, 8, &cpu);
    let affine = RandomAffine { degrees: 20.0, translate: (0.1, 0.1), scale: (0.8, 1.2), shear: 10.0 };
    let aug = Augment::new(5)
        .random_crop(2)?
        .horizontal_flip(0.5)?
        .normalize(&[0.5, 0.4, 0.3], &[0.2, 0.3, 0.4])?
        .random_affine(affine)?;
    let (a, b) = (aug.apply(&x, 1, 2)?.to_vec()?, aug.apply(&x.to_device(&gpu)?, 1, 2)?.to_vec()?);
    assert_close("augmented batch, cpu vs wgpu", &b, &a, 1e-4);
    Ok(())
}

#[test]
fn the_loader_and_fit_augment_training_batches() -> Result<()> {
    let cpu = Device::cpu();
    let n = 12;
    let data = images(n, 1, 12, &cpu).to_vec()?;
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 10).collect();
    let set = ClassDataset::<Shape3<1, 12, 12>, 10>::new(data, labels)?;
    let aug = Augment::new(1).random_crop(3)?.horizontal_flip(0.5)?;
    let batches = |loader: &DataLoader<'_, _>, epoch| -> Result<Vec<Vec<f32>>> {
        loader.iter(epoch).map(|b| b?.inputs.raw().to_vec()).collect()
    };
    let plain = DataLoader::new(&set, 4, &cpu)?;
    let augmented = DataLoader::new(&set, 4, &cpu)?.augment(Some(aug.clone()));
    assert!(augmented.augmentation().is_some() && plain.augmentation().is_none());
    assert_ne!(batches(&plain, 0)?, batches(&augmented, 0)?);
    assert_eq!(batches(&augmented, 0)?, batches(&augmented, 0)?, "the same epoch, the same batches");
    assert_ne!(batches(&augmented, 0)?, batches(&augmented, 1)?, "another epoch, other draws");
    // The prefetching path draws the same as the plain one.
    let mut prefetched = Vec::new();
    augmented.for_each(1, |b| {
        prefetched.push(b.inputs.raw().to_vec()?);
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    assert_eq!(prefetched, batches(&augmented, 1)?);
    // fit trains on augmented batches; a different augmentation seed gives different weights.
    let train = |seed: u64| -> Result<Vec<f32>> {
        let mut model = SmallCnn::<12>::new(&cpu, 0)?;
        let cfg = Fit::epochs(1).batch_size(4).verbose(Verbosity::Quiet);
        model.fit(&set, cfg.augment(Augment::new(seed).random_crop(3)?))?;
        model.fc.weight.tensor().to_vec()
    };
    assert_eq!(train(1)?, train(1)?);
    assert_ne!(train(1)?, train(2)?);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Parameters outside their ranges (probabilities, angles, fractions, scales, deviations,
    /// NaN anywhere) are an `InvalidArgument` when the pipeline is built, never a panic.
    #[test]
    fn bad_parameters_are_errors(p in prop_oneof![-2.0f32..3.0, Just(f32::NAN)],
                                 degrees in prop_oneof![-10.0f32..400.0, Just(f32::NAN)],
                                 lo in prop_oneof![-1.0f32..2.0, Just(f32::INFINITY)], hi in -1.0f32..2.0,
                                 std in prop_oneof![-1.0f32..1.0, Just(f32::NAN)]) {
        let flip = Augment::new(0).horizontal_flip(p);
        prop_assert_eq!(flip.is_ok(), (0.0..=1.0).contains(&p));
        let affine = RandomAffine { degrees, scale: (lo, hi), ..RandomAffine::default() };
        let valid = (0.0..=180.0).contains(&degrees) && lo.is_finite() && lo > 0.0 && lo <= hi;
        match Augment::new(0).random_affine(affine) {
            Ok(_) => prop_assert!(valid),
            Err(e) => {
                prop_assert!(!valid);
                prop_assert!(matches!(e, Error::InvalidArgument { op: "RandomAffine", .. }), "{}", e);
            }
        }
        prop_assert_eq!(Augment::new(0).normalize(&[0.5], &[std]).is_ok(), std > 0.0);
        prop_assert!(Augment::new(0).normalize(&[0.5, 0.5], &[1.0]).is_err());
        prop_assert!(Augment::new(0).normalize(&[], &[]).is_err());
    }
}
