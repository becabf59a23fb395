//! Inference without a mutable model: while an [`EvalGuard`] lives, every layer on this thread
//! behaves as in eval mode (dropout is the identity, batch norm uses and keeps its running
//! statistics), whatever its own training flag says, and no flag is changed. `evaluate` and
//! `predict` run under one, so they take `&Model`.
//!
//! A custom layer whose forward depends on training should ask [`training_active`] with its
//! own flag, as the built-in layers do.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// How many guards are alive on this thread (guards nest).
    static FORCED: Cell<usize> = const { Cell::new(0) };
}

/// Forces eval behaviour on this thread until dropped. Not `Send`: it belongs to its thread.
pub struct EvalGuard {
    _not_send: PhantomData<*const ()>,
}

impl EvalGuard {
    pub fn new() -> Self {
        FORCED.with(|f| f.set(f.get() + 1));
        EvalGuard { _not_send: PhantomData }
    }
}

impl Default for EvalGuard {
    fn default() -> Self {
        EvalGuard::new()
    }
}

impl Drop for EvalGuard {
    fn drop(&mut self) {
        FORCED.with(|f| f.set(f.get().saturating_sub(1)));
    }
}

/// Whether a layer whose own flag is `layer_training` should run its training behaviour now:
/// only when the flag is on and no [`EvalGuard`] is alive on this thread.
pub fn training_active(layer_training: bool) -> bool {
    layer_training && FORCED.with(|f| f.get() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_nest_and_release() {
        assert!(training_active(true));
        let outer = EvalGuard::new();
        let inner = EvalGuard::new();
        assert!(!training_active(true));
        drop(inner);
        assert!(!training_active(true));
        drop(outer);
        assert!(training_active(true) && !training_active(false));
    }
}
