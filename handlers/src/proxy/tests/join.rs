//! Dropping the branches of a request.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bumpalo::Bump;

use super::super::join::Branches;

/// A branch that never finishes; dropping it counts, and panics if told to.
struct Pending {
    dropped: Rc<Cell<usize>>,
    panics: bool,
}

impl Future for Pending {
    type Output = Result<(), ()>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.dropped.set(self.dropped.get() + 1);
        if self.panics {
            panic!("a branch destructor that panics");
        }
    }
}

/// A branch whose destructor panics does not keep the others from being
/// dropped (they are pinned in the arena, which is reused after): all
/// are, and then the panic goes on.
#[test]
fn every_branch_is_dropped_even_after_a_panic() {
    let arena = Bump::new();
    let dropped = Rc::new(Cell::new(0));
    // SAFETY: dropped below, before the arena.
    let branches = unsafe {
        Branches::new_in(&arena, 3, |i| Pending {
            dropped: dropped.clone(),
            panics: i == 0,
        })
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(branches)));
    assert!(result.is_err(), "the panic was swallowed");
    assert_eq!(
        dropped.get(),
        3,
        "a branch after the panicking one was not dropped"
    );
}
