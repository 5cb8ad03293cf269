//! Thread-local "current" slots: how code running on a core reaches the
//! state of its own layer without a handle passed down every call.
//!
//! Each layer keeps its own slot (the driver its I/O state, the executor
//! itself, the timers theirs) so that no lower layer names the core that
//! owns them all. A slot is a raw pointer in a `Cell`, not an `Rc` in a
//! `RefCell`: a thread-local with no destructor and no borrow flag is one
//! load per access, and I/O, timers and wakes reach for it several times
//! per request. The core fills every slot when it starts running on a
//! thread and empties them before it is freed (see `core::context`).

use std::cell::Cell;
use std::thread::LocalKey;

/// A layer's slot: declared by the layer with
/// `thread_local! { static CURRENT: Cell<*const T> = const { Cell::new(std::ptr::null()) }; }`.
pub(crate) type Key<T> = LocalKey<Cell<*const T>>;

/// Empties its slot when dropped.
pub(crate) struct Guard<T: 'static>(&'static Key<T>);

impl<T> Drop for Guard<T> {
    fn drop(&mut self) {
        self.0.set(std::ptr::null());
    }
}

/// Points `key` at `value` until the guard is dropped.
///
/// # Safety
///
/// `value` stays alive, at the same address, until the guard is dropped,
/// and the guard is dropped on this thread (it is `!Send`, holding a
/// pointer).
///
/// # Panics
///
/// When the slot is already filled: one core per thread.
pub(crate) unsafe fn enter<T>(key: &'static Key<T>, value: &T) -> Guard<T> {
    assert!(
        key.get().is_null(),
        "a percore core is already running on this thread"
    );
    key.set(value);
    Guard(key)
}

/// Runs `f` with what `key` points at, if anything. The borrow cannot
/// leave `f`, which keeps it shorter than the referent's life: the guard
/// that empties the slot lives in the frame that runs the core, below this
/// call on the same thread's stack (`enter`'s contract).
#[inline]
pub(crate) fn with<T, R>(key: &'static Key<T>, f: impl FnOnce(Option<&T>) -> R) -> R {
    let ptr = key.get();
    // SAFETY: non-null only while the guard lives, and the referent
    // outlives the guard (`enter`'s contract).
    f(unsafe { ptr.as_ref() })
}

/// The message of a panic outside a core thread.
pub(crate) const OUTSIDE: &str = "percore I/O, timers and spawn_local need a percore core thread \
     (inside a Handler, or percore::block_on)";
