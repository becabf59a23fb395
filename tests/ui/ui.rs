//! Compile-time behaviour of `#[model]` / `layers!` and of `fit`, in one trybuild run (one build
//! of the dependencies in `target/tests/trybuild`):
//! - `fail/`: every shape error is a spanned message that names the layer and both shapes;
//! - `train/`: fitting a dataset whose samples or targets do not fit the model is a compile
//!   error that reads in shapes;
//! - `pass/`: valid models build and run.
//!
//! Snapshots are the `.stderr` files beside the cases. Regenerate them with
//! `TRYBUILD=overwrite cargo test --release -p rumus-ui-tests`, then read every diff.

#[test]
fn ui() {
    // trybuild's cargo inherits this process's environment and builds in the dev profile, whose
    // debug info (of every dependency and of every pass case's binary) nothing here reads:
    // without it the build is faster and several times smaller. The only test in this binary,
    // so no other thread reads the environment meanwhile.
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "0");
    let t = trybuild::TestCases::new();
    t.compile_fail("fail/*.rs");
    t.compile_fail("train/*.rs");
    t.pass("pass/*.rs");
}
