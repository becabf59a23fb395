//! Inference without a mutable model: while an [`EvalGuard`] lives, every layer on this thread
//! behaves as in eval mode (dropout is the identity, batch norm uses and keeps its running
//! statistics), whatever its own training flag says, and no flag is changed. `evaluate` and
//! `predict` run under one, so they take `&Model`.
//!
//! A custom layer whose forward depends on training should ask [`training_active`] with its
//! own flag, as the built-in layers do.

use std::cell::Cell;

use crate::thread_depth::{inside, DepthGuard};

thread_local! {
    /// How many guards are alive on this thread (guards nest).
    static FORCED: Cell<usize> = const { Cell::new(0) };
}

/// Forces eval behaviour on this thread until dropped. Not `Send`: it belongs to its thread.
pub struct EvalGuard {
    _depth: DepthGuard,
}

impl EvalGuard {
    /// Forces evaluation mode until the guard is dropped (guards nest; any drop order works).
    pub fn new() -> Self {
        EvalGuard { _depth: DepthGuard::enter(&FORCED) }
    }
}

impl Default for EvalGuard {
    fn default() -> Self {
        EvalGuard::new()
    }
}

/// Whether a layer whose own flag is `layer_training` should run its training behaviour now:
/// only when the flag is on and no [`EvalGuard`] is alive on this thread.
pub fn training_active(layer_training: bool) -> bool {
    layer_training && !inside(&FORCED)
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
