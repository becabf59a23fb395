//! Switching graph recording off, per thread.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record a graph.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Disables graph recording until dropped (restores the previous state).
pub struct NoGradGuard {
    previous: bool,
}

impl NoGradGuard {
    pub fn new() -> Self {
        let previous = GRAD_ENABLED.with(|g| g.replace(false));
        NoGradGuard { previous }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

/// Runs `f` without recording a graph (inference, evaluation, optimizer updates).
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    let _guard = NoGradGuard::new();
    f()
}
