//! The current thread's executor.

use std::cell::Cell;
use std::sync::Arc;

use super::task::Runnable;
use super::Executor;
use crate::current::{self, Guard};

thread_local! {
    static CURRENT: Cell<*const Executor> = const { Cell::new(std::ptr::null()) };
}

/// Makes `executor` this thread's executor until the guard is dropped.
///
/// # Safety
///
/// As [`current::enter`]: `executor` outlives the guard, which stays on
/// this thread.
pub(crate) unsafe fn enter(executor: &Executor) -> Guard<Executor> {
    // SAFETY: this function's contract.
    unsafe { current::enter(&CURRENT, executor) }
}

/// Runs `f` with this thread's executor.
///
/// # Panics
///
/// Outside a percore core thread.
#[inline]
pub(crate) fn with_executor<R>(f: impl FnOnce(&Executor) -> R) -> R {
    current::with(&CURRENT, |e| f(e.expect(current::OUTSIDE)))
}

/// Like [`with_executor`], but `None` outside a core, for destructors.
#[inline]
pub(crate) fn try_with_executor<R>(f: impl FnOnce(&Executor) -> R) -> Option<R> {
    current::with(&CURRENT, |e| e.map(f))
}

/// Queues `task` locally if this thread runs the core whose id is `owner`;
/// hands it back when the wake must go through the owner's remote queue.
/// Generic over the task's type so that the handle comes back as it was
/// given.
#[inline]
pub(crate) fn schedule_local<T: Runnable + 'static>(
    owner: usize,
    task: Arc<T>,
) -> Result<(), Arc<T>> {
    current::with(&CURRENT, |executor| match executor {
        Some(executor) if executor.owner.id == owner => {
            executor.schedule(task);
            Ok(())
        }
        _ => Err(task),
    })
}
