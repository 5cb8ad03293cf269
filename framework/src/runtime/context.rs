//! The current thread's core, for code that runs inside it.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use super::core::Core;
use crate::executor::task::Runnable;

thread_local! {
    /// This thread's core while an [`EnterGuard`] lives, null otherwise. A
    /// raw pointer rather than an `Rc` in a `RefCell`: a thread-local with
    /// no destructor and no borrow flag is one load per access, and I/O,
    /// timers and wakes reach for the core several times per request.
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
    static CURRENT_ID: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Makes `core` this thread's core until the guard is dropped.
pub(crate) fn enter(core: Rc<Core>) -> EnterGuard {
    assert!(
        CURRENT.get().is_null(),
        "a percore core is already running on this thread"
    );
    CURRENT.set(Rc::as_ptr(&core));
    CURRENT_ID.set(core.shared.id);
    EnterGuard { _core: core }
}

/// Keeps the current core alive; clears it when dropped.
pub(crate) struct EnterGuard {
    _core: Rc<Core>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        // Cleared before the guard's `Rc` goes: destructors that run while
        // the core is freed find no core, as they must.
        CURRENT_ID.set(usize::MAX);
        CURRENT.set(std::ptr::null());
    }
}

/// Runs `f` with this thread's core, if one is entered. The borrow cannot
/// leave `f`, which is what keeps it shorter than the core's life: the
/// `EnterGuard` that owns the core (`!Send`, it holds an `Rc`) lives in the
/// frame that runs the core, below this call on this thread's stack, and
/// nulls the pointer before it releases its `Rc`.
fn with_current<R>(f: impl FnOnce(Option<&Core>) -> R) -> R {
    let ptr = CURRENT.get();
    // SAFETY: non-null only while the guard owning that `Core` lives (above).
    let core = unsafe { ptr.as_ref() };
    f(core)
}

/// Runs `f` with this thread's core.
///
/// # Panics
///
/// Outside a percore core thread: percore I/O and timers only work on the
/// core that owns them.
pub(crate) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> R {
    with_current(|core| {
        f(core.expect(
            "percore I/O, timers and spawn_local need a percore core thread \
             (inside a Handler, or percore::block_on)",
        ))
    })
}

/// Like [`with_core`], but `None` outside a core (or while a core is being
/// freed), for destructors.
pub(crate) fn try_with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    with_current(|core| core.map(f))
}

/// Queues `task` locally if this thread runs core `owner`; hands it back
/// when the wake must go through the owner's remote queue. Generic over the
/// task's type so that the handle comes back as it was given.
#[inline]
pub(crate) fn schedule_local<T: Runnable + 'static>(
    owner: usize,
    task: Arc<T>,
) -> Result<(), Arc<T>> {
    if CURRENT_ID.get() != owner {
        return Err(task);
    }
    let mut task = Some(task);
    try_with_core(|core| {
        if let Some(task) = task.take() {
            core.executor.schedule(task);
        }
    });
    task.map_or(Ok(()), Err)
}
