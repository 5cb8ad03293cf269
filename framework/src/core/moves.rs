//! A core's orders to move connections elsewhere: how many of its
//! connections should leave, and for which core. The policy (see
//! `server::moving`) or an operator's call sets them; a connection that
//! reaches a request boundary takes one and moves.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many connections should leave this core, and where to. Read on
/// every request boundary of a connection that can move: one relaxed
/// load while there are none.
#[derive(Debug, Default)]
pub(crate) struct MoveOrders {
    /// The core they go to.
    target: AtomicUsize,
    /// How many are still to go.
    left: AtomicUsize,
}

impl MoveOrders {
    /// Orders `count` connections to core `target`, replacing the orders
    /// before (0 cancels them).
    pub(crate) fn set(&self, target: usize, count: usize) {
        self.left.store(0, Ordering::Release);
        self.target.store(target, Ordering::Release);
        self.left.store(count, Ordering::Release);
    }

    /// Takes one order: the core one connection should move to.
    #[inline]
    pub(crate) fn take(&self) -> Option<usize> {
        if self.left.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()
            .map(|_| self.target.load(Ordering::Acquire))
    }
}
