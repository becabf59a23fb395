//! Per-thread nesting counters behind scope guards (`NoGradGuard`, `EvalGuard`): a guard counts
//! itself in while it lives, guards nest and may be dropped in any order, and the state they
//! switch is "on" exactly while the count is above zero.

use std::cell::Cell;
use std::marker::PhantomData;
use std::thread::LocalKey;

/// A thread's counter of live guards of one kind.
pub(crate) type Depth = LocalKey<Cell<usize>>;

/// Counts itself into `depth` until dropped. Not `Send` nor `Sync` (`*const ()`): a guard
/// belongs to the thread whose counter it raised, so it can never lower another thread's.
pub(crate) struct DepthGuard {
    depth: &'static Depth,
    _thread_bound: PhantomData<*const ()>,
}

impl DepthGuard {
    pub(crate) fn enter(depth: &'static Depth) -> Self {
        depth.with(|d| d.set(d.get().saturating_add(1)));
        DepthGuard { depth, _thread_bound: PhantomData }
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        self.depth.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Whether any guard counted into `depth` is alive on this thread.
pub(crate) fn inside(depth: &'static Depth) -> bool {
    depth.with(|d| d.get() > 0)
}
