//! Switching graph recording off, per thread.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// Live [`NoGradGuard`]s of this thread; grad is recorded iff there are none.
    static NO_GRAD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Whether ops on this thread record a graph.
pub fn is_grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(|d| d.get() == 0)
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
    /// `*const ()` makes the guard `!Send` and `!Sync`.
    _thread_bound: PhantomData<*const ()>,
}

impl NoGradGuard {
    pub fn new() -> Self {
        NO_GRAD_DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        NoGradGuard { _thread_bound: PhantomData }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        NO_GRAD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `f` without recording a graph (inference, evaluation, optimizer updates).
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
