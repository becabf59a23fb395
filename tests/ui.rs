//! Compile-time behaviour of `#[model]` / `layers!`: every shape error is a spanned message that
//! names the layer and both shapes (tests/ui/fail/*.stderr), and valid models build and run
//! (tests/ui/pass). Regenerate snapshots with `TRYBUILD=overwrite cargo test --test ui`, then
//! read every .stderr.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
