//! Switching graph recording off, per thread.

use std::cell::Cell;

use crate::thread_depth::{inside, DepthGuard};

thread_local! {
    /// Live [`NoGradGuard`]s of this thread; grad is recorded iff there are none.
    static NO_GRAD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Whether ops on this thread record a graph.
pub fn is_grad_enabled() -> bool {
    !inside(&NO_GRAD_DEPTH)
}

/// Disables graph recording on this thread until dropped. Guards nest and may be dropped in any
/// order: recording resumes once every guard of the thread is gone. A guard belongs to the thread
/// that made it (it is neither `Send` nor `Sync`), so it cannot switch another thread's state:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(rumus::autograd::NoGradGuard::new());
/// ```
pub struct NoGradGuard {
    _depth: DepthGuard,
}

impl NoGradGuard {
    /// Stops recording until the guard is dropped (guards nest; any drop order restores recording).
    pub fn new() -> Self {
        NoGradGuard { _depth: DepthGuard::enter(&NO_GRAD_DEPTH) }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `f` without recording a graph (inference, evaluation, optimizer updates).
///
/// ```
/// use rumus::{no_grad, Device, RawTensor};
///
/// let w = RawTensor::ones(&[2], &Device::cpu())?.requires_grad_()?;
/// assert!(w.mul_scalar(2.0)?.requires_grad());
/// let y = no_grad(|| w.mul_scalar(2.0))?;
/// assert!(!y.requires_grad()); // nothing recorded: no gradient flows back to w
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    let _guard = NoGradGuard::new();
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_guards_restore_grad_in_order_and_out_of_order() {
        assert!(is_grad_enabled());
        let (outer, inner) = (NoGradGuard::new(), NoGradGuard::new());
        drop(inner);
        assert!(!is_grad_enabled());
        drop(outer);
        assert!(is_grad_enabled());
        let (outer, inner) = (NoGradGuard::new(), NoGradGuard::new());
        drop(outer);
        assert!(!is_grad_enabled(), "the inner guard is still alive");
        drop(inner);
        assert!(is_grad_enabled(), "out-of-order drops must restore grad");
        no_grad(|| assert!(!is_grad_enabled()));
        assert!(is_grad_enabled());
    }
}
