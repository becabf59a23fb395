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
