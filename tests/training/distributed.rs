//! `Fit::distributed` without MPI: one rank (`Distributed::single()`) trains exactly as `fit`
//! with `drop_last`, validation included, and `Distributed::evaluate` is `evaluate`. The MPI
//! runs themselves (two ranks against one, faults, who writes) are in `tests/reliability/mpi.rs`.

use rumus::distributed::Distributed;
use rumus::prelude::*;

use crate::common::{regression_data, weights, LinReg};

#[test]
fn one_rank_trains_bit_for_bit_as_fit_with_drop_last() {
    let data = regression_data(70, 3).unwrap();
    let val = regression_data(20, 4).unwrap();
    let settings = || Fit::epochs(3).batch_size(16).optimizer(Sgd::new(0.05)).verbose(Verbosity::Quiet);
    let mut plain = LinReg::new(1).unwrap();
    let plain_history = plain.fit(&data, settings().drop_last(true).validation(&val)).unwrap();
    let mut single = LinReg::new(1).unwrap();
    let single_history = single.fit(&data, settings().distributed(&Distributed::single()).validation(&val)).unwrap();
    assert_eq!(weights(&plain), weights(&single));
    for name in ["loss", "val_loss"] {
        assert_eq!(plain_history.get(name), single_history.get(name), "{name}");
    }
    let whole = plain.evaluate(&val).unwrap();
    let sharded = Distributed::single().evaluate(&plain, &val).unwrap();
    assert_eq!((whole.loss, whole.samples), (sharded.loss, sharded.samples));
}

#[test]
fn too_few_samples_for_one_global_batch_is_an_error() {
    let data = regression_data(10, 3).unwrap();
    let mut model = LinReg::new(1).unwrap();
    let err = model
        .fit(&data, Fit::epochs(1).batch_size(16).verbose(Verbosity::Quiet).distributed(&Distributed::single()))
        .unwrap_err();
    assert!(err.to_string().contains("no global batch"), "{err}");
}

/// Rank 0 of two whose partner computes exactly what it does: every sum is twice this rank's
/// values, every broadcast keeps rank 0's. Through the trait's default (non-overlapped)
/// `all_reduce_sum_buckets`.
pub(crate) struct Mirrored;

impl rumus::distributed::Collective for Mirrored {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        2
    }

    fn all_reduce_sum(&self, values: &mut [f32], _: &str) -> Result<()> {
        values.iter_mut().for_each(|v| *v *= 2.0);
        Ok(())
    }

    fn broadcast(&self, _: &mut [f32], _: usize, _: &str) -> Result<()> {
        Ok(())
    }

    fn abort(&self, message: &str) -> ! {
        panic!("abort: {message}")
    }

    fn name(&self) -> String {
        "mirrored".into()
    }
}

#[test]
fn gradient_buckets_of_any_cap_give_the_same_steps_and_a_bad_cap_is_an_error() {
    let data = regression_data(64, 3).unwrap();
    let dist = Distributed::new(Mirrored);
    let train = |cap: f32, accumulate: usize| {
        let mut model = LinReg::new(1).unwrap();
        let cfg = Fit::epochs(2).batch_size(8).optimizer(Adam::new(0.01)).verbose(Verbosity::Quiet);
        model.fit(&data, cfg.accumulate_grad_batches(accumulate).bucket_cap_mb(cap).distributed(&dist)).unwrap();
        weights(&model)
    };
    for accumulate in [1, 2] {
        // A cap of one scalar puts every tensor in a bucket of its own; infinity makes one.
        let (many, one) = (train(1e-9, accumulate), train(f32::INFINITY, accumulate));
        assert_eq!(many, one, "accumulate {accumulate}");
        assert_ne!(many, weights(&LinReg::new(1).unwrap()), "training moved the weights");
    }
    for bad in [0.0, -1.0, f32::NAN] {
        let mut model = LinReg::new(1).unwrap();
        let err = model.fit(&data, Fit::epochs(1).bucket_cap_mb(bad).distributed(&dist)).unwrap_err();
        assert!(err.to_string().contains("bucket_cap_mb"), "{err}");
    }
}
