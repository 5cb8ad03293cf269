//! The current thread's core, for code that runs inside it.

use std::cell::Cell;
use std::rc::Rc;

use crate::core::Core;
use crate::current::{self, Guard};

thread_local! {
    /// This thread's core while an [`EnterGuard`] lives, null otherwise
    /// (see `crate::current` for why a raw pointer).
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Makes `core` this thread's core, and its driver, executor and timers
/// those of the thread's layers, until the guard is dropped.
pub(crate) fn enter(core: Rc<Core>) -> EnterGuard {
    // SAFETY: the guard owns an `Rc` of the core, which owns the executor,
    // the I/O and the timers; its fields drop in order, every slot is
    // emptied before the `Rc` is released, and the guard is `!Send`.
    unsafe {
        let slot = current::enter(&CURRENT, &*core);
        let executor = crate::executor::current::enter(&core.executor);
        let io = crate::driver::current::enter(&core.io);
        let time = crate::time::current::enter(&core.time);
        EnterGuard {
            _slots: (time, io, executor, slot),
            _core: core,
        }
    }
}

/// Keeps the current core alive; empties every slot when dropped, before
/// the core's `Rc` goes: destructors that run while the core is freed find
/// no core, as they must.
pub(crate) struct EnterGuard {
    _slots: (
        Guard<crate::time::current::Timers>,
        Guard<crate::driver::current::Io>,
        Guard<crate::executor::Executor>,
        Guard<Core>,
    ),
    _core: Rc<Core>,
}

/// Runs `f` with this thread's core.
///
/// # Panics
///
/// Outside a percore core thread.
pub(crate) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> R {
    current::with(&CURRENT, |core| f(core.expect(current::OUTSIDE)))
}

/// Like [`with_core`], but `None` outside a core (or while a core is being
/// freed), for destructors.
pub(crate) fn try_with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    current::with(&CURRENT, |core| core.map(f))
}
