//! Panics of user code that runs outside any task's poll.
//!
//! A task's poll is wrapped in `catch_unwind` by the executor, but a core
//! also runs user code elsewhere: wakers woken by the driver, the timer
//! wheel and the stop, destructors of buffers and of detached tasks'
//! outputs. A panic there must not unwind through the code that called it
//! (the driver's reap would lose the completions it had not dispatched
//! yet), nor out of the core's loop (which would skip the drain of what
//! the kernel still holds). So those calls go through here: a panic is
//! caught and kept, and the core records it (counted and logged) at the
//! end of the turn, as it records a task's panic.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// A caught panic's payload.
pub(crate) type Payload = Box<dyn Any + Send>;

thread_local! {
    /// Panics caught on this thread and not yet recorded by its core.
    /// Touched only when something panicked, and once per loop turn.
    static CAUGHT: RefCell<Vec<Payload>> = const { RefCell::new(Vec::new()) };
    /// Whether `CAUGHT` may hold anything: the core checks this once per
    /// turn, a flag being cheaper to read than a `RefCell`'s vector.
    static ANY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, keeping its panic for the core to record.
/// Returns whether `f` finished.
#[inline]
pub(crate) fn catching(f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(payload) => {
            keep(payload);
            false
        }
    }
}

/// Wakes `waker`; a user waker's panic is kept, not unwound.
#[inline]
pub(crate) fn wake(waker: Waker) {
    catching(|| waker.wake());
}

/// Keeps a panic caught elsewhere for the core to record.
#[cold]
pub(crate) fn keep(payload: Payload) {
    // A payload whose own destructor panics is dropped here, inside
    // nothing that could lose work; a busy `CAUGHT` cannot happen (only
    // `take` borrows it, and it runs no user code while it does).
    CAUGHT.with(|caught| {
        if let Ok(mut caught) = caught.try_borrow_mut() {
            caught.push(payload);
        }
    });
    ANY.set(true);
}

/// Hands every kept panic to `record`, oldest first.
#[inline]
pub(crate) fn take(record: impl FnMut(&(dyn Any + Send))) {
    if ANY.get() {
        take_kept(record);
    }
}

#[cold]
fn take_kept(mut record: impl FnMut(&(dyn Any + Send))) {
    ANY.set(false);
    loop {
        let next = CAUGHT.with(|caught| {
            let mut caught = caught.borrow_mut();
            if caught.is_empty() {
                None
            } else {
                Some(caught.remove(0))
            }
        });
        let Some(payload) = next else {
            return;
        };
        record(&*payload);
        // The payload's destructor is user code too.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    }
}
