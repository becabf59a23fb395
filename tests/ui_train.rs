//! Compile-fail cases: fitting a dataset whose samples or targets do not fit the model is a
//! compile error that reads in shapes. Snapshots in tests/ui/train/*.stderr
//! (regenerate with `TRYBUILD=overwrite cargo test --release --test ui_train`).

#[test]
fn mismatched_datasets_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/train/*.rs");
}
